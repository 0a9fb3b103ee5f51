"""A WSGI app answering every path with its own path in brackets (``[/ready]``): the
worker tests' load, served by gunicorn under the service's own settings file."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = f"[{environ.get('PATH_INFO', '')}]".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

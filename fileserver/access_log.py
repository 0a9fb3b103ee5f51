"""The request log and the activity count, as the outermost WSGI middleware.

Each request is one line, written when its response has been sent (so its duration includes
the transfer): method, path, status and seconds. Nothing else of the request is logged: no
header (the Authorization and Cookie headers carry tokens) and no query string (a
``?token=`` in a URL is one). The path is logged percent-encoded, so that whatever bytes a
client puts in it stay on one line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import quote

from fileserver.activity import Activity

_LOG = logging.getLogger("fileserver.access")

_SAFE = "/!$&'()*+,;=:@-._~"
"""Characters a path may hold unencoded (RFC 3986's pchar, less ``%``)."""

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class AccessLog:
    def __init__(self, app: WSGIApp, activity: Activity) -> None:
        self.app = app
        self.activity = activity

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        request = _Request(environ, self.activity)

        def recording(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            request.status = status.split(" ", 1)[0]
            return start_response(status, headers, exc_info)

        try:
            body = self.app(environ, recording)
        except BaseException:
            request.finish()
            raise
        return _Body(body, request)


class _Request:
    def __init__(self, environ: dict[str, Any], activity: Activity) -> None:
        self.method = str(environ.get("REQUEST_METHOD", "-"))
        self.path = _path(environ)
        self.status = "-"
        self.activity = activity
        self.started = time.monotonic()
        self.finished = False
        activity.begin()

    def finish(self) -> None:
        """Log the request and count it ended, once, whichever way it ends."""
        if self.finished:
            return
        self.finished = True
        seconds = time.monotonic() - self.started
        self.activity.end()
        _LOG.info("%s %s %s %.3fs", self.method, self.path, self.status, seconds)


class _Body:
    """The response body, passed through. The request ends when the body has been sent
    (its iteration ends), when sending it fails, or at its ``close``, which the server calls
    even when the client has gone: whichever comes first. A request left counted in flight
    would keep the server from ever being idle."""

    def __init__(self, body: Iterable[bytes], request: _Request) -> None:
        self.body = body
        self.request = request

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self.body
        finally:
            self.request.finish()

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self.request.finish()


def _path(environ: dict[str, Any]) -> str:
    """The request's path as the client sent it (WSGI hands it over decoded, as Latin-1),
    percent-encoded again."""
    path = str(environ.get("SCRIPT_NAME", "")) + str(environ.get("PATH_INFO", ""))
    return quote(path.encode("latin-1", errors="replace"), safe=_SAFE)

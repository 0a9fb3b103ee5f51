"""gunicorn's access log: one short line a request, query strings redacted.

The line is built here rather than from ``access_log_format``: gunicorn's general formatter
first copies every request header, response header and environ entry into a dictionary,
which cost about a tenth of a status request. The line keeps what an operator reads: client
address, request line, status, bytes sent and milliseconds.

The service's routes take few query parameters, so most query strings are a caller's
mistake, and a common one is a token sent as ``?token=...``. Such a request is refused, but
the access log would still keep the token. Every query value is replaced here but those of the
routes' own parameters (``SHOWN_PARAMETERS``, none of them secret), and names are kept so the
mistake can be seen. This module imports nothing of the app: gunicorn's arbiter
loads it before forking workers, where the network libraries must not be imported yet.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from gunicorn.glogging import Logger

REDACTED = "[redacted]"
SHOWN_PARAMETERS = frozenset({"grace_seconds", "started_at"})
"""Query parameters of the routes themselves (a kernel delete's grace, a head restart's time)."""


def redact_query(query: str) -> str:
    """``token=abc&x=`` → ``token=[redacted]&x=``: each value replaced but those of
    ``SHOWN_PARAMETERS``, names kept."""
    parts = []
    for part in query.split("&"):
        name, sep, value = part.partition("=")
        shown = not value or name in SHOWN_PARAMETERS
        parts.append(part if shown else f"{name}{sep}{REDACTED}")
    return "&".join(parts)


def access_line(resp: Any, environ: dict[str, Any], request_time: dt.timedelta) -> str:
    """``127.0.0.1 "GET /spawner/v1/labs/rachel HTTP/1.1" 200 312 1ms``."""
    path = environ.get("PATH_INFO") or ""
    query = environ.get("QUERY_STRING") or ""
    target = f"{path}?{redact_query(query)}" if query else path
    status = str(resp.status).split(None, 1)[0]
    sent = getattr(resp, "sent", None)
    milliseconds = request_time.seconds * 1000 + request_time.microseconds // 1000
    return (
        f"{environ.get('REMOTE_ADDR', '-')} "
        f'"{environ.get("REQUEST_METHOD")} {target} {environ.get("SERVER_PROTOCOL")}" '
        f"{status} {'-' if sent is None else sent} {milliseconds}ms"
    )


class AccessLogger(Logger):
    """gunicorn's logger, writing :func:`access_line` for each request."""

    def access(
        self, resp: Any, req: Any, environ: dict[str, Any], request_time: dt.timedelta
    ) -> None:
        if not self.access_log_enabled:
            return
        self.access_log.info("%s", access_line(resp, environ, request_time))

"""gunicorn's access log: one short line a request, query strings redacted.

The line is built here rather than from ``access_log_format``: gunicorn's general formatter
first copies every request header, response header and environ entry into a dictionary,
which cost about a tenth of a status request. The line keeps what an operator reads: client
address, request line, status, bytes sent and milliseconds.

The service's routes take few query parameters, so most query strings are a caller's
mistake, and a common one is a token sent as ``?token=...``. Such a request is refused, but
the access log would still keep the token. Every query value is replaced here but those of the
routes' own parameters (``SHOWN_PARAMETERS``, none of them secret), and names are kept so the
mistake can be seen. This module imports nothing of the app but ``app.log`` (the standard
library only), and the configuration when gunicorn sets its logger up: gunicorn's arbiter
loads it before forking workers, where the network libraries must not be imported yet.

With ``logFormat: json`` the line is a JSON object (:func:`access_entry`) with the request id
and, once authenticated, the user, both left in the WSGI environ by the app
(``app.web.request_id``); in text it ends with ``request=<id>`` and ``user=<name>``.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from typing import Any

from gunicorn.glogging import Logger

from app.log import (
    ENVIRON_REQUEST_ID,
    ENVIRON_ROUTE,
    ENVIRON_USER,
    format_gunicorn_log,
    iso_time,
    json_line,
    json_lines,
    redact,
)

REDACTED = "[redacted]"
SHOWN_PARAMETERS = frozenset(
    {"grace_seconds", "started_at", "limit", "tail", "group", "older_than_seconds"}
)
"""Query parameters of the routes themselves (a kernel delete's grace, a head restart's time,
a list's limit, a log's tail, an app list's group, a failed lab's age)."""


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
    """``127.0.0.1 "GET /spawner/v1/labs/rachel HTTP/1.1" 200 312 1ms request=<id>
    user=rachel``."""
    path = environ.get("PATH_INFO") or ""
    query = environ.get("QUERY_STRING") or ""
    target = f"{path}?{redact_query(query)}" if query else path
    sent = getattr(resp, "sent", None)
    line = (
        f"{environ.get('REMOTE_ADDR', '-')} "
        f'"{environ.get("REQUEST_METHOD")} {target} {environ.get("SERVER_PROTOCOL")}" '
        f"{_status(resp)} {'-' if sent is None else sent} {_milliseconds(request_time)}ms"
    )
    for name, key in (("request", ENVIRON_REQUEST_ID), ("user", ENVIRON_USER)):
        if environ.get(key):
            line += f" {name}={environ[key]}"
    return redact(line)


def access_entry(
    resp: Any, environ: dict[str, Any], request_time: dt.timedelta, *, pid: int
) -> dict[str, Any]:
    """The JSON access line's fields (see the operators' page on logs)."""
    method = environ.get("REQUEST_METHOD") or ""
    path = environ.get("PATH_INFO") or ""
    status = _status(resp)
    entry: dict[str, Any] = {
        "time": iso_time(time.time()),
        "level": "INFO",
        "logger": "access",
        "pid": pid,
        "message": f"{method} {path} {status}",
        "request_id": environ.get(ENVIRON_REQUEST_ID),
        "user": environ.get(ENVIRON_USER),
        "method": method,
        "path": path,
        "query": redact_query(environ.get("QUERY_STRING") or "") or None,
        "route": environ.get(ENVIRON_ROUTE),
        "status": int(status) if status.isdigit() else status,
        "size": getattr(resp, "sent", None),
        "duration_ms": _milliseconds(request_time),
        "client": environ.get("REMOTE_ADDR"),
        "protocol": environ.get("SERVER_PROTOCOL"),
    }
    return {name: value for name, value in entry.items() if value is not None}


def _status(resp: Any) -> str:
    return str(resp.status).split(None, 1)[0]


def _milliseconds(request_time: dt.timedelta) -> int:
    return (
        request_time.days * 86_400_000
        + request_time.seconds * 1000
        + (request_time.microseconds // 1000)
    )


class AccessLogger(Logger):
    """gunicorn's logger, writing :func:`access_line` (or, in JSON, :func:`access_entry`)
    for each request, and gunicorn's own lines in the service's format from the first."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        # gunicorn logs its banner before any hook runs, so the format is read here; the
        # arbiter's ``on_starting`` reads the configuration again and reports a bad one.
        from app.config import load_config

        try:
            log_format = load_config().log_format
        except Exception:
            return
        format_gunicorn_log(log_format)

    def access(
        self, resp: Any, req: Any, environ: dict[str, Any], request_time: dt.timedelta
    ) -> None:
        if not self.access_log_enabled:
            return
        if json_lines():
            line = json_line(access_entry(resp, environ, request_time, pid=os.getpid()))
        else:
            line = access_line(resp, environ, request_time)
        self.access_log.info("%s", line)

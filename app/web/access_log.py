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
library only), besides gunicorn and gevent (which the arbiter has loaded already), and the
configuration when gunicorn sets its logger up: gunicorn's arbiter loads it before forking
workers, where the network libraries must not be imported yet.

With ``logFormat: json`` the line is a JSON object (:func:`access_entry`) with the request id
and, once authenticated, the user, both left in the WSGI environ by the app
(``app.web.request_id``); in text it ends with ``request=<id>`` and ``user=<name>``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
from json.encoder import encode_basestring as _string
from typing import Any

import gevent
from gevent import monkey
from gunicorn.glogging import Logger

from app.log import (
    ENVIRON_REQUEST_ID,
    ENVIRON_ROUTE,
    ENVIRON_USER,
    format_gunicorn_log,
    iso_time,
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


def access_json(resp: Any, environ: dict[str, Any], request_time: dt.timedelta, *, pid: int) -> str:
    """The JSON access line (see the operators' page on logs), written out field by field:
    building a dictionary and encoding it cost three times as much. Strings are escaped by
    the ``json`` module's own function, and the whole line is redacted, as every line is."""
    method = environ.get("REQUEST_METHOD") or ""
    path = environ.get("PATH_INFO") or ""
    status = _status(resp)
    query = environ.get("QUERY_STRING")
    line = (
        f'{{"time": "{iso_time(time.time())}", "level": "INFO", "logger": "access", '
        f'"pid": {pid}, "message": {_string(f"{method} {path} {status}")}'
    )
    for name, value in (
        ("request_id", environ.get(ENVIRON_REQUEST_ID)),
        ("user", environ.get(ENVIRON_USER)),
        ("method", method),
        ("path", path),
        ("query", redact_query(query) if query else None),
        ("route", environ.get(ENVIRON_ROUTE)),
        ("status", int(status) if status.isdigit() else status),
        ("size", getattr(resp, "sent", None)),
        ("duration_ms", _milliseconds(request_time)),
        ("client", environ.get("REMOTE_ADDR")),
        ("protocol", environ.get("SERVER_PROTOCOL")),
    ):
        if value is not None:
            line += f', "{name}": {_string(value) if isinstance(value, str) else _json(value)}'
    return redact(line + "}")


def access_entry(
    resp: Any, environ: dict[str, Any], request_time: dt.timedelta, *, pid: int
) -> dict[str, Any]:
    """The JSON access line's fields, as a reader of the log gets them."""
    entry: dict[str, Any] = json.loads(access_json(resp, environ, request_time, pid=pid))
    return entry


def _json(value: Any) -> str:
    """A field's value that is not a string: a number (status, size, milliseconds)."""
    return str(value) if type(value) is int else json.dumps(value, default=str)


def _status(resp: Any) -> str:
    return str(resp.status).split(None, 1)[0]


def _milliseconds(request_time: dt.timedelta) -> int:
    return (
        request_time.days * 86_400_000
        + request_time.seconds * 1000
        + (request_time.microseconds // 1000)
    )


class AccessLogger(Logger):
    """gunicorn's logger, writing :func:`access_line` (or, in JSON, :func:`access_json`)
    for each request, and gunicorn's own lines in the service's format from the first.

    The line goes straight to the access log's stream rather than through ``logging``: a
    record, the logger's and the handler's checks, the handler's lock and a formatter whose
    format is the message cost as much as the line itself. Only when the access log is
    gunicorn's one handler (``accesslog`` set, no logging configuration or syslog that could
    add others); otherwise, and if a write fails (a file being reopened), through
    ``logging`` as before. No lock is needed: a worker's requests are greenlets of one
    thread, and lines are written by one call that does not yield.

    In a gevent worker the lines of one turn of its event loop go out in one write, at the
    end of that turn (``loop.run_callback``), rather than one write and flush a request:
    a write to the container's log pipe wakes its reader, and a bare route spent 35-50 µs
    of its 420-520 µs a request writing its line to a file, 60-70 µs to a pipe (2 workers,
    ``wrk`` with 64 connections). A busy worker serves many requests a turn; an idle one
    writes each line as its request ends, as before. What a turn holds is bounded by the
    worker's connections, and a worker killed mid-turn loses that turn's lines at most.
    """

    _direct: logging.StreamHandler[Any] | None = None
    _turns: Any = None
    """The event loop whose turns batch the lines, once this worker's first line finds one
    (``False``: none, each line is written at once)."""
    _pending: list[str]

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        self._direct = _direct_handler(self.access_log, cfg)
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
            line = access_json(resp, environ, request_time, pid=os.getpid())
        else:
            line = access_line(resp, environ, request_time)
        handler = self._direct
        if handler is None:
            self.access_log.info("%s", line)
            return
        turns = self._turns
        if turns is None:
            # The first line of this process: gunicorn sets the logger up in the arbiter,
            # before its workers fork and gevent patches them.
            turns = self._turns = _event_loop()
            self._pending = []
        if turns is False:
            self._write([line])
            return
        self._pending.append(line)
        if len(self._pending) == 1:
            turns.run_callback(self._write_pending)

    def _write_pending(self) -> None:
        lines, self._pending = self._pending, []
        self._write(lines)

    def _write(self, lines: list[str]) -> None:
        handler = self._direct
        if handler is None or not _written(handler.stream, "\n".join(lines)):
            for line in lines:
                self.access_log.info("%s", line)


def _written(stream: Any, text: str) -> bool:
    """Whether ``text`` (lines without their last end of line) went to ``stream``; False if
    it has none or the write failed (a file being reopened), and the lines then go through
    ``logging``."""
    if stream is None:
        return False
    try:
        stream.write(text + "\n")
        stream.flush()
    except (OSError, ValueError):
        return False
    return True


def _event_loop() -> Any:
    """The gevent loop of this thread when gevent runs it (a gevent worker), else False."""
    if not monkey.is_module_patched("threading"):
        return False
    return gevent.get_hub().loop


_DIRECT_HANDLERS = (logging.StreamHandler, logging.FileHandler)


def _direct_handler(log: logging.Logger, cfg: Any) -> logging.StreamHandler[Any] | None:
    """The handler whose stream the access lines may be written to directly: gunicorn's
    own, alone, unfiltered; None when logging is configured otherwise."""
    if cfg.logconfig or cfg.logconfig_dict or cfg.logconfig_json or cfg.syslog:
        return None
    if len(log.handlers) != 1 or log.filters or not log.isEnabledFor(logging.INFO):
        return None
    handler = log.handlers[0]
    if type(handler) not in _DIRECT_HANDLERS or handler.filters:
        return None
    assert isinstance(handler, logging.StreamHandler)
    return handler

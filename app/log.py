"""Logging set-up: JSON lines or plain text, a context that names the request and the
operation behind each record, and a filter that keeps credentials out of every line.

The context is a ``ContextVar``: each request and each operation run is its own greenlet
under gevent (a thread elsewhere), and a new greenlet starts with an empty context, so a
record carries the request id and the operation id of whatever it was logged for, and
nothing of another request served by the same worker at the same moment.

This module imports only the standard library: gunicorn's arbiter imports it (through the
access logger) before forking workers, where the network libraries must not be imported yet.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import re
import secrets
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

_SECRETS = re.compile(
    r"(gt-[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{22})|((?i:bearer)\s+[A-Za-z0-9._~+/=-]+)"
)

LOG_FORMATS = ("json", "text")
"""``logFormat``: one JSON object per line (production), or plain text (the local stack)."""

REQUEST_ID_HEADER = "X-Request-Id"
_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A request id taken from a caller: at most 128 characters of a charset that needs no
quoting in a log line or a header (ingress-nginx sends 32 hex digits, others UUIDs)."""

ENVIRON_REQUEST_ID = "spawner.request_id"
ENVIRON_USER = "spawner.user"
ENVIRON_ROUTE = "spawner.route"
"""Where the app leaves a request's id, authenticated user and route rule in the WSGI
environ, which gunicorn hands its access logger once the response is sent: the access line
gets them without a response header carrying the user."""


def redact(text: str) -> str:
    """Replace Gafaelfawr tokens and bearer credentials with a marker.

    Every line passes here, and almost none holds a credential, so the pattern runs only on
    text that could match it: a token contains ``gt-``, a bearer credential the word
    ``bearer`` in some case. For ASCII text those two substring tests find every match of
    the pattern, at a tenth of its cost; other text always gets the pattern.
    """
    if text.isascii() and "gt-" not in text and "bearer" not in text.lower():
        return text
    return _SECRETS.sub("[redacted]", text)


def new_request_id() -> str:
    """A fresh request id: 16 random bytes in hex, the shape ingress-nginx gives its own."""
    return secrets.token_hex(16)


def accept_request_id(value: str | None) -> str:
    """The caller's ``X-Request-Id`` if it is sane, else a new one.

    An id is written into every log line and event of the request and its operation, so
    one out of bounds, of another charset, or shaped like a credential (a token sent in
    the wrong header) is never echoed: the request gets an id of its own instead.
    """
    if value is not None and _REQUEST_ID.fullmatch(value) and redact(value) == value:
        return value
    return new_request_id()


@dataclass(frozen=True)
class LogContext:
    """What the records logged for a request or an operation name."""

    request_id: str | None = None
    user: str | None = None
    operation: str | None = None
    """The id of the operation being run."""
    workload: str | None = None
    """The operation's workload (``lab:rachel``)."""


_NO_CONTEXT = LogContext()
_context: ContextVar[LogContext] = ContextVar("spawner_log_context", default=_NO_CONTEXT)


def current_request_id() -> str | None:
    """The id of the request being served, or of the request that queued the operation
    being run; None in background work."""
    return _context.get().request_id


@contextlib.contextmanager
def logging_context(**fields: str | None) -> Iterator[LogContext]:
    """Name ``fields`` (``LogContext``'s) in every record logged inside the block; what was
    named before comes back after it."""
    token = _context.set(replace(_context.get(), **fields))
    try:
        yield _context.get()
    finally:
        _context.reset(token)


def bind(**fields: str | None) -> None:
    """Name ``fields`` for the rest of the enclosing ``logging_context`` (the request's
    user, once it is authenticated)."""
    _context.set(replace(_context.get(), **fields))


class RedactingFilter(logging.Filter):
    """Rewrites records so that no token reaches a handler, whatever the caller logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True


class ContextFilter(logging.Filter):
    """Copies the log context onto each record, where the formatters read it."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _context.get()
        for name in CONTEXT_FIELDS:
            if not hasattr(record, name):
                setattr(record, name, getattr(context, name))
        return True


CONTEXT_FIELDS = ("request_id", "user", "operation", "workload")


_second_text: tuple[int, str] = (-1, "")
"""The last whole second :func:`iso_time` formatted, and its text up to the milliseconds:
lines come many a second, and formatting a date is most of the cost of a timestamp."""


def iso_time(timestamp: float) -> str:
    """``2026-11-27T06:35:22.123Z``: UTC, milliseconds, what log collectors parse."""
    global _second_text
    second = int(timestamp // 1)
    cached_second, text = _second_text
    if second != cached_second:
        moment = dt.datetime.fromtimestamp(second, dt.UTC)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S.")
        # One assignment of a tuple: a thread reading it sees the old pair or the new one.
        _second_text = (second, text)
    milliseconds = min(999, round((timestamp - second) * 1_000_000) // 1000)
    return f"{text}{milliseconds:03d}Z"


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
"""``json.dumps`` with these options makes an encoder per call; one serves every line."""


def json_line(entry: dict[str, Any]) -> str:
    """One JSON object on one line, credentials redacted (JSON escapes none of their
    characters, so the pattern finds them in the encoded text)."""
    return redact(_ENCODER.encode(entry))


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time``, ``level``, ``logger``, ``pid``, ``message``,
    the context's fields when set, and ``exception`` with the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": iso_time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json_line(entry)


class TextFormatter(logging.Formatter):
    """``<time> <level> <logger> [<pid>] <message>``, then ``request=``, ``user=``,
    ``operation=`` and ``workload=`` when set; tracebacks redacted too."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        named = [
            f"{'request' if name == 'request_id' else name}={value}"
            for name in CONTEXT_FIELDS
            if (value := getattr(record, name, None))
        ]
        if named:
            head, newline, rest = line.partition("\n")
            line = f"{head} {' '.join(named)}{newline}{rest}"
        return redact(line)


_json_lines = False


def json_lines() -> bool:
    """Whether this process writes JSON lines (``logFormat: json``); the access log asks."""
    return _json_lines


def formatter(log_format: str) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else TextFormatter()


def configure_logging(level: str, log_format: str = "json") -> None:
    """Log to stderr (gunicorn collects it) at ``level``, as ``log_format`` says, with
    each record's context and credentials redacted; gunicorn's own lines alike."""
    global _json_lines
    _json_lines = log_format == "json"
    root = logging.getLogger()
    handler = next(
        (h for h in root.handlers if any(isinstance(f, RedactingFilter) for f in h.filters)),
        None,
    )
    if handler is None:
        handler = logging.StreamHandler()
        handler.addFilter(RedactingFilter())
        handler.addFilter(ContextFilter())
        root.addHandler(handler)
    handler.setFormatter(formatter(log_format))
    root.setLevel(level)
    # In JSON, Python's warnings (gevent's about patching late) are records too, not text.
    logging.captureWarnings(_json_lines)
    format_gunicorn_log(log_format)


def format_gunicorn_log(log_format: str) -> None:
    """Write gunicorn's own lines (workers booting, timeouts) as the service's: its error
    logger has handlers of its own and does not propagate to the root's."""
    for handler in logging.getLogger("gunicorn.error").handlers:
        handler.setFormatter(formatter(log_format))
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
            handler.addFilter(ContextFilter())

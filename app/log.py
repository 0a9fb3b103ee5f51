"""Logging set-up, with a filter that keeps credentials out of every log line."""

from __future__ import annotations

import logging
import re

_SECRETS = re.compile(
    r"(gt-[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{22})|((?i:bearer)\s+[A-Za-z0-9._~+/=-]+)"
)


def redact(text: str) -> str:
    """Replace Gafaelfawr tokens and bearer credentials with a marker."""
    return _SECRETS.sub("[redacted]", text)


class RedactingFilter(logging.Filter):
    """Rewrites records so that no token reaches a handler, whatever the caller logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True


def configure_logging(level: str) -> None:
    """Log to stderr (gunicorn collects it) at ``level``, redacting credentials."""
    root = logging.getLogger()
    if not any(isinstance(f, RedactingFilter) for h in root.handlers for f in h.filters):
        handler = logging.StreamHandler()
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s")
        )
        handler.addFilter(RedactingFilter())
        root.addHandler(handler)
    root.setLevel(level)

"""Times as the API shows them: ISO 8601 in UTC, to the second, with a ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_utc(timestamp: float | None) -> str | None:
    """``2026-11-22T08:10:11Z`` for a Unix time; None stays None."""
    if timestamp is None:
        return None
    moment = datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")
    return moment.replace("+00:00", "Z")


def parse_iso(value: object) -> float | None:
    """The Unix time of an ISO 8601 string (Kubernetes' timestamps); None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None

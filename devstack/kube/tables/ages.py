"""Ages as kube-apiserver writes them in table cells: ``45s``, ``5m3s``, ``3h5m``, ``2d3h``.

A table's cells are text the server renders, so every age in a ``kubectl get`` comes from
here: a coarser unit the older something is, with the next unit down only while it still
matters (minutes under ten, hours under eight, days under eight, years under eight).
"""

from __future__ import annotations

from datetime import datetime

_MINUTE = 60
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
_YEAR = 365 * _DAY

UNKNOWN = "<unknown>"
"""The cell of a timestamp that is not set."""


def human_duration(seconds: float) -> str:
    """A duration in the short form ``kubectl get`` shows.

    Up to two seconds in the future counts as now (clocks of different machines disagree);
    more than that is ``<invalid>``.
    """
    whole = int(seconds)  # toward zero, as the server truncates
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 2 * _MINUTE:
        return f"{whole}s"
    minutes = whole // _MINUTE
    if minutes < 10:
        return _pair(minutes, "m", whole % _MINUTE, "s")
    if minutes < 3 * 60:
        return f"{minutes}m"
    hours = whole // _HOUR
    if hours < 8:
        return _pair(hours, "h", minutes % 60, "m")
    if hours < 48:
        return f"{hours}h"
    days = whole // _DAY
    if days < 8:
        return _pair(days, "d", hours % 24, "h")
    years = whole // _YEAR
    if years < 2:
        return f"{days}d"
    if years < 8:
        return _pair(years, "y", days % 365, "d")
    return f"{years}y"


def _pair(major: int, major_unit: str, minor: int, minor_unit: str) -> str:
    return f"{major}{major_unit}" + (f"{minor}{minor_unit}" if minor else "")


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 timestamp of an object (seconds or microseconds, ``Z`` or an offset), or
    None when it is absent or not one."""
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def age(timestamp: object, now: float) -> str:
    """How long ago ``timestamp`` was, at ``now`` (seconds since the epoch); ``<unknown>``
    without one."""
    moment = parse_time(timestamp)
    if moment is None:
        return UNKNOWN
    return human_duration(now - moment.timestamp())

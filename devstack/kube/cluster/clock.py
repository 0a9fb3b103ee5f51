"""Timestamps in the shape the Kubernetes API uses (RFC 3339, UTC, second precision)."""

from __future__ import annotations

from datetime import UTC, datetime


def now_rfc3339() -> str:
    """The current time as the API server would write it in a status or event."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

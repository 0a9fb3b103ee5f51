"""An app's record as Kubernetes tells it: from its Deployment, for a record Redis lost."""

from __future__ import annotations

from typing import Any

from app.builders import names
from app.workloads.app.models import AppRecord, parse_choices


def record_from_deployment(deployment: dict[str, Any]) -> AppRecord | None:
    """The group's choices, from the annotation the Deployment was made with; None for a
    Deployment without a readable one (not made by this service, or going away)."""
    meta = deployment.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return None
    raw = (meta.get("annotations") or {}).get(names.APP_ANNOTATION)
    if not raw:
        return None
    try:
        return parse_choices(raw)
    except (ValueError, KeyError, TypeError):
        return None

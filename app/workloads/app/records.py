"""An app's record as Kubernetes tells it: from its Deployment, for a record Redis lost."""

from __future__ import annotations

import json
from typing import Any

from app.builders import names
from app.workloads.app.models import AppRecord, AppScope


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
        fields = json.loads(raw)
        return AppRecord(
            id=str(fields["id"]),
            group=str(fields["group"]),
            template=str(fields["template"]),
            template_version=str(fields["template_version"]),
            name=str(fields["name"]),
            scope=AppScope(fields["scope"]),
            size=str(fields["size"]),
            env={str(k): str(v) for k, v in (fields.get("env") or {}).items()},
            stopped=bool(fields["stopped"]),
            created=str(fields["created"]),
            creator=str(fields["creator"]),
        )
    except (ValueError, KeyError, TypeError):
        return None

"""An app's record as the engine stores it, and as Kubernetes tells it: from its Deployment,
for a record Redis lost.

A record is stored as its schema (``AppRecordSchema``) dumps it; its Deployment keeps the
group's choices, the record less its ``OBSERVED_FIELDS``, in the same form.
"""

from __future__ import annotations

from typing import Any

from app.builders import names
from app.schemas.records import SPACED, RecordText
from app.workloads.app.models import OBSERVED_FIELDS, AppRecord
from app.workloads.app.schemas import AppRecordSchema

APP_TEXT = RecordText(AppRecord, AppRecordSchema, separators=SPACED)
"""An app's record as the engine stores it."""
app_json = APP_TEXT.dump
parse_app = APP_TEXT.parse

CHOICES_TEXT = RecordText(AppRecord, AppRecordSchema, separators=SPACED, exclude=OBSERVED_FIELDS)
"""The group's choices, as its Deployment keeps them: read, the rest of the record is left to
be read again from Kubernetes."""
choices_json = CHOICES_TEXT.dump
parse_choices = CHOICES_TEXT.parse


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
    except ValueError:
        return None

"""What the engine's reconcile does with validation pods (see ``app.engine.tracking``).

A validation pod lives only while its validation runs, which removes it however it ends. One
found while no validation of its digest runs (its worker died and nobody resumed it, or Redis
lost the operation) serves no one: the reconcile deletes it. Image records do not follow pods
between validations, and are not rebuilt from them.
"""

from __future__ import annotations

from typing import Any

from app.builders.validation import DIGEST_ANNOTATION, VALIDATION_SELECTOR
from app.engine.tracking import WorkloadTracking


class ValidationTracking(WorkloadTracking):
    selector = VALIDATION_SELECTOR

    def owner(self, obj: dict[str, Any]) -> str | None:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        digest = annotations.get(DIGEST_ANNOTATION)
        return str(digest) if digest else None

    def assess(self, record: str, pod: dict[str, Any] | None) -> str | None:
        return None

    def rebuild(self, pod: dict[str, Any]) -> str | None:
        return None

    def orphaned(self, pod: dict[str, Any]) -> bool:
        return True

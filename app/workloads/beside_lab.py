"""What the kinds that run beside a user's lab share in tracking: their objects are in the
owner's lab namespace and labelled with the owner and the workload's name, which the engine
knows as ``owner/name`` (clusters, kernels)."""

from __future__ import annotations

from typing import Any

from app.builders.names import lab_namespace
from app.workloads.kind import ServiceTracking


class BesideLabTracking(ServiceTracking):
    """A kind's tracking whose workloads are ``owner/name`` in the owner's lab namespace."""

    owner_label: str
    name_label: str

    def owner(self, obj: dict[str, Any]) -> str | None:
        """``owner/name`` of an object labelled with both, in its owner's lab namespace;
        None for one anywhere else."""
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        owner, name = labels.get(self.owner_label), labels.get(self.name_label)
        if not owner or not name:
            return None
        if meta.get("namespace") != lab_namespace(self._config.namespace_prefix, str(owner)):
            return None
        return f"{owner}/{name}"

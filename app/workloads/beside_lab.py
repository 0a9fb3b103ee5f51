"""What the kinds that run beside a user's lab share (clusters, kernels): the engine knows
each of their workloads as ``owner/<key>``; their services read them by owner and key, and
their objects are in the owner's lab namespace, labelled with the owner and the key, which
their tracking follows."""

from __future__ import annotations

from typing import Any, TypeVar

from app.builders.names import lab_namespace
from app.engine.engine import Engine
from app.engine.service import RecordCodec, WorkloadService
from app.models.workload import WorkloadRef
from app.storage.event_hub import Following
from app.workloads.context import WorkloadContext
from app.workloads.kind import ServiceTracking

R = TypeVar("R")


class BesideLabService(WorkloadService[R]):
    """A kind's service whose workloads a user holds beside the lab: its records by owner,
    one by owner and key, and its events."""

    def __init__(self, ctx: WorkloadContext, engine: Engine, codec: RecordCodec[R]) -> None:
        super().__init__(engine, codec, idle_seconds=ctx.config.operations.keepalive_seconds)
        self._ctx = ctx

    def ref(self, owner: str, key: str) -> WorkloadRef:
        return WorkloadRef(self._codec.kind, f"{owner}/{key}")

    def missing(self, owner: str, key: str) -> str:
        """What a 404 says of a workload the owner does not have."""
        return f"user {owner} has no {self._codec.noun} {key}"

    def of_owner(self, owner: str) -> list[R]:
        """The owner's workloads of the kind; never a partial list while Redis is being
        rebuilt."""
        return self.owned_by(owner)

    def one(self, owner: str, key: str) -> R:
        return self.find(self.ref(owner, key), missing=self.missing(owner, key))

    def events(self, owner: str, key: str, *, after: str) -> Following:
        """The events of the workload's current (or last) operation, from after ``after``."""
        return self.follow_events(
            self.ref(owner, key), after=after, missing=self.missing(owner, key)
        )


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

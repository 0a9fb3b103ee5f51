"""What a kind tells the engine so that its records follow Kubernetes between operations.

Kubernetes is the truth about what exists; Redis is what every worker answers from. Drift
appears when something happens outside an operation (a pod deleted by hand, evicted, a
node lost) or when Redis loses its data. The engine's elected watcher applies single
changes as it sees them, and its reconcile compares everything now and then; both ask the
kind what a pod means for its record.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, Protocol

from app.models.workload import WorkloadRef, WorkloadStatus

TERMINATING = WorkloadStatus.TERMINATING.value


class Ending(Protocol):
    """How the engine deletes a workload that ended by itself (``Engine.end``)."""

    def __call__(self, ref: WorkloadRef, *, reason: str) -> object: ...


class WorkloadTracking(ABC):
    """How the engine finds a kind's pods and judges them against its records."""

    resource: str = "pods"
    """The objects that stand for the kind's workloads: their pods (one per workload), or
    for a workload whose pods come and go (an app, stopped) the object that owns them, as
    ``deployments``. "Pod" below means an object of this resource."""

    watched: str | None = None
    """What the elected watcher follows, when not ``resource``: objects whose changes tell
    of a workload's state sooner (an app's pods: a crash loop changes no Deployment). The
    selector must match them too, and ``owner`` and ``assess`` take them as well."""

    selector: str
    """A label selector for every pod of the kind, in any namespace, and nothing else."""

    namespace: str | None = None
    """The one namespace all the kind's objects are in (which is all its service account
    may list there); None: any namespace."""

    @property
    def watched_resource(self) -> str:
        return self.watched or self.resource

    owns_namespaces: bool = False
    """Whether each workload of the kind has a namespace of its own, which the reconcile
    deletes once nothing refers to it any more."""

    @abstractmethod
    def owner(self, obj: dict[str, Any]) -> str | None:
        """The name of the workload a pod (or namespace) of the kind belongs to; None for
        an object that carries the kind's labels but is not where its workload's would be."""

    @abstractmethod
    def assess(self, record: str, pod: dict[str, Any] | None) -> str | None:
        """The record that ``pod`` (None: no pod) calls for, or None if ``record`` is right.
        Only asked about workloads no operation is working on."""

    @abstractmethod
    def rebuild(self, pod: dict[str, Any]) -> str | None:
        """A record from the pod alone, for a workload Redis has forgotten; None when the
        pod cannot tell (or is going away anyway)."""

    def prepare(self) -> None:
        """Called by the reconcile before it judges the kind's pods: a kind that needs more
        than a pod to judge or rebuild its workload (a lab's Service address) reads it here,
        for every workload in one call, rather than once per workload."""
        return None

    def release(self) -> None:
        """Called when the reconcile is through: forget what ``prepare`` read."""
        return None

    def ended(self, record: str, pod: dict[str, Any] | None) -> str | None:
        """Why the workload has ended by itself, so that the engine deletes what is left of
        it (a server that exits when idle: its Job completed; or its object is gone), as a
        sentence for the deletion's first event; None while it goes on. Only asked about
        workloads no operation is working on, before ``assess``."""
        return None

    def ending(self, record: str) -> str:
        """The record as the deletion of a workload that ended by itself begins: its
        ``status`` (every kind's record has one, see ``app.engine.kind``) ``terminating``,
        as a compact JSON text with sorted keys. A kind whose records are kept otherwise
        says how here."""
        fields = json.loads(record)
        fields["status"] = TERMINATING
        return json.dumps(fields, sort_keys=True, separators=(",", ":"))

    def orphaned(self, pod: dict[str, Any]) -> bool:
        """Whether the pod serves no one any more (what used it is gone), so the reconcile
        deletes it. Only asked about pods no operation is working on."""
        return False

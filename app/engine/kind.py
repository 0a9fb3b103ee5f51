"""What a kind of workload plugs into the engine.

The engine runs operations: it queues them atomically, leases them to one worker, resumes
them when that worker dies, bounds them by a deadline, writes their events and records
their outcome. A kind says what its operations do. It declares:

- its **record**: the JSON text the engine stores and the routes serve. It has a
  ``status`` field; ``failed`` lets a new spawn replace the workload, ``terminating`` is what
  a delete sets (see ``WorkloadStore``);
- its **steps**: ``spawn`` and ``delete`` run idempotently from the top (a worker that
  resumes an operation runs them again), report through ``run.reporter``, and return the
  record to keep;
- its **readiness and failures**: a step raises ``StepFailed`` with a message a user can
  act on as soon as it knows the workload cannot come up (see ``app.engine.pods`` for
  pods), never waiting for the deadline;
- its **timeouts**, and the record a failed operation leaves;
- its **tracking** (``WorkloadTracking``): how to find its pods and judge them, so that the
  engine's elected watcher and reconcile keep its records in step with Kubernetes and
  rebuild them when Redis lost them;
- whether its creations are **admitted** (``app.engine.admission``): queued fairly behind
  others when more than the configured number are in progress.

Adding a kind is one package under ``app/workloads/`` with a ``WorkloadKind`` subclass and
one line in ``app.workloads.kinds.KINDS``, the list the engine is built from; its steps read
and keep records through ``Run.workloads``, never the store itself.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol

from app.engine.reporter import Reporter
from app.engine.tracking import WorkloadTracking
from app.metrics import FailureReason
from app.models.workload import Action, Operation, WorkloadRef
from app.storage.workloads import StoredNames, WorkloadStore


class StepFailed(Exception):
    """The operation cannot succeed; the message says why in terms a user can act on, and
    ``reason`` in one of a few words, for the metrics."""

    def __init__(self, message: str, reason: FailureReason = FailureReason.OTHER) -> None:
        super().__init__(message)
        self.reason = reason


class WorkloadRecords(Protocol):
    """The engine's records as a kind's code reads and repairs them: the engine for a
    service, ``RunWorkloads`` for a run's steps. Nothing else holds the store."""

    def record(self, ref: WorkloadRef) -> str | None: ...

    def records(self, kind: str) -> dict[str, str]: ...

    def put_if_idle(self, *, ref: WorkloadRef, record: str, expect: str | None) -> bool: ...


class RunWorkloads:
    """What a run's steps read and write of the engine's records: their own workload's (as
    long as their operation is current), and the others' they count against or repair (a
    user's clusters and kernels, a group's apps, a source's images)."""

    def __init__(self, store: WorkloadStore, operation: Operation) -> None:
        self._store = store
        self._operation = operation

    def current(self) -> str | None:
        """The workload's record now (the one its service queued, or wrote since)."""
        return self._store.record(self._operation.ref)

    def keep(self, record: str) -> bool:
        """Write the workload's record while this run's operation is still current; False
        when another has superseded it (the record is left to that one)."""
        return self._store.put_if_current(operation=self._operation, record=record)

    def record(self, ref: WorkloadRef) -> str | None:
        return self._store.record(ref)

    def records(self, kind: str) -> dict[str, str]:
        """Every record of ``kind``, by name."""
        return self._store.records(kind)

    def stored_names(self, kind: str) -> StoredNames:
        """The names of ``kind``'s workloads, and whether Redis holds every workload."""
        return self._store.stored_names(kind)

    def put_if_idle(self, *, ref: WorkloadRef, record: str, expect: str | None) -> bool:
        """Write another workload's record while no operation works on it and it is still
        ``expect`` (see ``WorkloadStore.put_if_idle``)."""
        return self._store.put_if_idle(ref=ref, record=record, expect=expect)


@dataclass(frozen=True)
class Run:
    """One run of an operation, as its steps see it."""

    operation: Operation
    reporter: Reporter
    secret: str | None
    """The secret queued with the operation (a spawn's token), None once it expired."""
    workloads: RunWorkloads
    waiting: Callable[[], AbstractContextManager[None]] = nullcontext
    """A step that waits on Kubernetes (a pod starting, a namespace going) does so inside
    ``with run.waiting():``. A worker runs a bounded number of operations at once, so that
    a storm of them does not starve its requests of the CPU; an operation waiting for a
    kubelet uses none, and gives its place to another for the rest of its run (what follows
    a wait is a few writes). Without this, a storm of 300 spawns with a kubelet taking 2 s
    to start a lab took 25 s, each worker starting only 32 labs every 2 s."""


@dataclass(frozen=True)
class Finished:
    """A successful operation's outcome: the workload's record to keep (None removes it),
    written with what the steps kept for the end (``Reporter.at_end``) and the engine's
    closing ``progress 100`` and ``complete``."""

    record: str | None


class WorkloadKind(ABC):
    """A kind of workload: its name, timeouts, steps and failed record."""

    name: str
    """The kind's name in workload references, Redis keys and event subjects."""

    tracking: WorkloadTracking | None = None
    """How its records follow its pods between operations; None: they need not."""

    admitted: bool = False
    """Whether its spawns queued with a group wait for a place (fair admission): what
    users create on demand is; what the platform runs for itself is not."""

    @abstractmethod
    def timeout(self, action: Action) -> float:
        """Seconds an operation doing ``action`` may take in all, from when it is queued."""

    @abstractmethod
    def spawn(self, run: Run) -> Finished:
        """Bring the workload up, and return its record once it is ready."""

    @abstractmethod
    def delete(self, run: Run) -> Finished:
        """Take the workload down, and return what remains (usually nothing)."""

    @abstractmethod
    def failed_record(self, run: Run, message: str) -> str | None:
        """The record to keep after ``run`` failed with ``message``; None keeps none."""

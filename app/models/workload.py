"""What the engine knows of any workload: its reference, its operations and their actions.

A workload is something the service owns in Kubernetes for a user or the platform: a lab
today, and compute clusters, remote kernels, group apps and image-validation pods next. The
engine never looks inside a workload's record or spec; those belong to its kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


@dataclass(frozen=True, order=True)
class WorkloadRef:
    """Names one workload: its kind ("lab") and its name within the kind (a lab's is its
    user's name)."""

    kind: str
    name: str

    @property
    def key(self) -> str:
        """The workload's one-string form, used in Redis keys and as its event subject."""
        return f"{self.kind}:{self.name}"

    @classmethod
    def from_key(cls, key: str) -> WorkloadRef:
        kind, sep, name = key.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"not a workload key: {key!r}")
        return cls(kind, name)


class WorkloadStatus(StrEnum):
    """Where a workload stands, in every kind's record (its ``status``). The engine reads
    two: a ``failed`` workload may be spawned again, and a delete sets ``terminating``."""

    STARTING = "starting"
    RUNNING = "running"
    EXITED = "exited"
    """Its process ended after it ran (a kernel; ``exit_code`` says how)."""
    FAILED = "failed"
    """It could not come up, or went without the service deleting it (``error`` says why)."""
    TERMINATING = "terminating"


def status_values(*statuses: WorkloadStatus) -> list[str]:
    """The statuses a kind's records take, as its schema lists them."""
    return [status.value for status in statuses]


class Action(StrEnum):
    """What an operation does to its workload."""

    SPAWN = "spawn"
    DELETE = "delete"


@dataclass(frozen=True)
class Operation:
    """A spawn or delete in progress, stored in Redis so that any worker can run it, and
    resume it when the worker that ran it dies."""

    id: str
    ref: WorkloadRef
    action: Action
    started: float
    deadline: float
    spec: dict[str, Any] | None = None
    """What the kind needs to run the operation again from the top (never a secret)."""
    request_id: str | None = None
    """The id of the request that queued it, named in the log lines and events of its run
    in whichever worker runs it (None when background work queued it)."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "kind": self.ref.kind,
            "name": self.ref.name,
            "action": self.action.value,
            "started": self.started,
            "deadline": self.deadline,
            "spec": self.spec,
        }
        if self.request_id is not None:
            data["request_id"] = self.request_id
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Operation:
        return cls(
            id=str(data["id"]),
            ref=WorkloadRef(str(data["kind"]), str(data["name"])),
            action=Action(data["action"]),
            started=float(data["started"]),
            deadline=float(data["deadline"]),
            spec=data.get("spec"),
            request_id=data.get("request_id"),
        )

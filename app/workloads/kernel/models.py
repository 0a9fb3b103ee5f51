"""A remote kernel as the service records it (the routes' body, stored in Redis as JSON
through its schema, ``app.workloads.kernel.schemas.KernelSchema``).

The connection key is not part of it: it lives in the kernel's Secret and in the Jupyter
server that asked for the kernel, and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.models.identity import UserInfo
from app.models.sizes import PodSize
from app.models.usage import BudgetedRecord, Usage, kernel_usage
from app.models.workload import WorkloadStatus

KERNEL_PORTS = {"shell": 50001, "iopub": 50002, "stdin": 50003, "control": 50004, "hb": 50005}
"""The kernel's ports on its pod's own address: fixed, since each kernel has a pod (and so an
address) of its own; the kernel pod's start-up uses the same defaults."""
DEFAULT_GRACE_SECONDS = 5
"""A delete's grace period when its request gave none (a kernel going with its lab)."""


@dataclass(frozen=True)
class KernelRecord(BudgetedRecord):
    """What the service knows of one kernel: who asked for what, where it listens, how it is."""

    kernel_id: str
    owner: str
    namespace: str
    status: WorkloadStatus
    size: str
    image: str
    created: str
    ip: str | None = None
    ports: dict[str, int] = field(default_factory=lambda: dict(KERNEL_PORTS))
    exit_code: int | None = None

    @property
    def holds(self) -> bool:
        """Whether its pod holds (or is about to hold) resources: one starting or running
        does, and one being deleted until it is gone, unless it had ended or failed before."""
        if self.status is WorkloadStatus.TERMINATING:
            return self.exit_code is None and self.error is None
        return self.status in (WorkloadStatus.STARTING, WorkloadStatus.RUNNING)


def kernel_size_usage(size: PodSize) -> Usage:
    """What a kernel of ``size`` holds against its owner's budget."""
    return kernel_usage(size.cpu_request, size.memory_request, size.gpus)


@dataclass(frozen=True)
class KernelSpec:
    """A kernel as asked for, once checked: everything its objects are built from. The
    key is not in it (see ``app.workloads.kernel.builders``)."""

    kernel_id: str
    user: UserInfo
    image: str
    """The reference to run, pinned to a digest where the service knows it."""
    size: PodSize
    env: dict[str, str] = field(default_factory=dict)

    @property
    def username(self) -> str:
        return self.user.username

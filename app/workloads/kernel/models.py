"""A remote kernel as the service records it (the routes' body, stored in Redis as JSON).

The connection key is not part of it: it lives in the kernel's Secret and in the Jupyter
server that asked for the kernel, and nowhere else.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from app.models.identity import UserInfo
from app.models.sizes import PodSize
from app.models.usage import Usage, kernel_usage

KERNEL_PORTS = {"shell": 50001, "iopub": 50002, "stdin": 50003, "control": 50004, "hb": 50005}
"""The kernel's ports on its pod's own address: fixed, since each kernel has a pod (and so an
address) of its own; the kernel pod's start-up uses the same defaults."""


class KernelStatus(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    EXITED = "exited"
    """The kernel process ended after it ran (``exit_code`` says how)."""
    FAILED = "failed"
    """It could not come up, or its pod went without the service deleting it (``error``)."""
    TERMINATING = "terminating"


@dataclass(frozen=True)
class KernelRecord:
    """What the service knows of one kernel: who asked for what, where it listens, how it is."""

    kernel_id: str
    owner: str
    namespace: str
    status: KernelStatus
    size: str
    image: str
    created: str
    usage: dict[str, float] = field(default_factory=dict)
    """What it holds against its owner's budget (``app.models.usage.Usage``'s fields)."""
    ip: str | None = None
    ports: dict[str, int] = field(default_factory=lambda: dict(KERNEL_PORTS))
    exit_code: int | None = None
    error: str | None = None

    @property
    def holds(self) -> bool:
        """Whether its pod holds (or is about to hold) resources: one starting or running
        does, and one being deleted until it is gone, unless it had ended or failed before."""
        if self.status is KernelStatus.TERMINATING:
            return self.exit_code is None and self.error is None
        return self.status in (KernelStatus.STARTING, KernelStatus.RUNNING)


def kernel_json(record: KernelRecord) -> str:
    data = asdict(record)
    data["status"] = record.status.value
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def parse_kernel(raw: str) -> KernelRecord:
    data: dict[str, Any] = json.loads(raw)
    data["status"] = KernelStatus(data["status"])
    return KernelRecord(**data)


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

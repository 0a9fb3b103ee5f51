"""What workloads hold, in the terms budgets count: the one currency of
``app.workloads.budgets``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Usage:
    """What some workloads hold, in the budget's terms."""

    clusters: int = 0
    workers: int = 0
    kernels: int = 0
    cpu: float = 0.0
    memory: int = 0
    gpus: int = 0

    @classmethod
    def from_json(cls, data: Mapping[str, float]) -> Usage:
        """A usage as a record stores it (its fields as JSON numbers)."""
        return cls(
            clusters=int(data.get("clusters", 0)),
            workers=int(data.get("workers", 0)),
            kernels=int(data.get("kernels", 0)),
            cpu=float(data.get("cpu", 0.0)),
            memory=int(data.get("memory", 0)),
            gpus=int(data.get("gpus", 0)),
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            clusters=self.clusters + other.clusters,
            workers=self.workers + other.workers,
            kernels=self.kernels + other.kernels,
            cpu=self.cpu + other.cpu,
            memory=self.memory + other.memory,
            gpus=self.gpus + other.gpus,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            clusters=self.clusters - other.clusters,
            workers=self.workers - other.workers,
            kernels=self.kernels - other.kernels,
            cpu=self.cpu - other.cpu,
            memory=self.memory - other.memory,
            gpus=self.gpus - other.gpus,
        )


def cluster_usage(
    workers: int,
    worker: tuple[float, int, int],
    head: tuple[float, int, int],
) -> Usage:
    """What a cluster holds: itself, its workers, and the CPU, memory and GPUs its pods
    request; ``worker`` and ``head`` are each pod's (cores, memory, GPUs)."""
    return Usage(
        clusters=1,
        workers=workers,
        cpu=workers * worker[0] + head[0],
        memory=workers * worker[1] + head[1],
        gpus=workers * worker[2] + head[2],
    )


def kernel_usage(cpu: float, memory: int, gpus: int) -> Usage:
    """What a kernel holds: itself, and the CPU, memory and GPUs its pod requests."""
    return Usage(kernels=1, cpu=cpu, memory=memory, gpus=gpus)

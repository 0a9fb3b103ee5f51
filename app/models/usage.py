"""What workloads hold, in the terms budgets count: the one currency of
``app.workloads.budgets``."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from app.models.fields_json import from_fields


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
        return from_fields(cls, data)

    def __add__(self, other: Usage) -> Usage:
        return self._fieldwise(operator.add, other)

    def __sub__(self, other: Usage) -> Usage:
        return self._fieldwise(operator.sub, other)

    def _fieldwise(self, op: Callable[[Any, Any], Any], other: Usage) -> Usage:
        """``op`` of each field of this usage and of ``other``."""
        return Usage(
            **{f.name: op(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)}
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


@dataclass(frozen=True, kw_only=True)
class BudgetedRecord:
    """What the record of a workload counted against its owner's budget (a cluster, a
    kernel) holds beside its own fields."""

    usage: dict[str, float] = field(default_factory=dict)
    """What it holds against its owner's budget (``Usage``'s fields)."""
    error: str | None = None
    """Why it failed."""

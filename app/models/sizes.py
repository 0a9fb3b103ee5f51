"""The size of one pod of a workload beside the labs: a kernel's, an app's.

Users ask by the names they know: the spawn form's lab sizes, or the compute clusters'
hardware tiers (for GPUs and node pools). Either becomes one ``PodSize``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PodSize:
    """The resources and placement of one pod (from a lab size or a hardware tier)."""

    name: str
    cpu_request: float
    cpu_limit: float
    memory_request: int
    memory_limit: int
    gpus: int = 0
    node_selector: dict[str, str] = field(default_factory=dict)

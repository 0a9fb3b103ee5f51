"""What a kernel's or an app's pod may be given: a lab size or a hardware tier, by name.

A notebook that needs more than its lab asks for a bigger kernel, and a group for its app, by
the names users know already: the spawn form's sizes, checked exactly as at spawn (groups,
the user's notebook quota), or the compute clusters' hardware tiers (for GPUs and node pools),
where a tier restricted to some kinds of cluster is not offered. A lab size wins over a tier
of the same name.
"""

from __future__ import annotations

from app.models.config import Config, HardwareTier, LabSize
from app.models.identity import UserInfo
from app.models.sizes import PodSize
from app.workloads.entitlements import size_refusal


def of_lab_size(size: LabSize) -> PodSize:
    return PodSize(size.name, size.cpu_request, size.cpu, size.memory_request, size.memory)


def of_tier(tier: HardwareTier, node_pool_label: str) -> PodSize:
    return PodSize(
        tier.name,
        tier.cores,
        tier.cores_limit,
        tier.memory,
        tier.memory,
        tier.gpus,
        {node_pool_label: tier.node_pool} if tier.node_pool else {},
    )


def pod_size(config: Config, name: str) -> PodSize | None:
    """The size of that name, whoever asks; None when there is none beside labs."""
    size = config.lab.size(name)
    if size is not None:
        return of_lab_size(size)
    tier = config.clusters.tier(name)
    if tier is not None and not tier.kinds:
        return of_tier(tier, config.clusters.node_pool_label)
    return None


def size_for(config: Config, name: str, user: UserInfo) -> PodSize | str:
    """The size ``user`` may give a kernel, or why they may not have it."""
    lab_size = config.lab.size(name)
    if lab_size is not None:
        refusal = size_refusal(user, lab_size)
        return refusal if refusal is not None else of_lab_size(lab_size)
    size = pod_size(config, name)
    if size is None:
        offered = [s.name for s in config.lab.sizes]
        offered += [t.name for t in config.clusters.tiers if not t.kinds and t.name not in offered]
        return f"unknown size {name!r}; sizes are: {', '.join(offered)}"
    return size

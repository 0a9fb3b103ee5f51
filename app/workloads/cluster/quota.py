"""What a cluster's pods request and may use, for its lab namespace's ResourceQuota
(``app.workloads.quota``): its head's tier once and its workers' tier per worker.
"""

from __future__ import annotations

from app.builders.resource_quota import Compute
from app.models.config import ClustersConfig, HardwareTier
from app.workloads.cluster.models import ClusterRecord


def tier_compute(tier: HardwareTier) -> Compute:
    """What one pod given ``tier`` requests and may use."""
    return Compute(tier.cores, tier.memory, tier.cores_limit, tier.memory)


def cluster_compute(record: ClusterRecord, config: ClustersConfig) -> Compute:
    """What all of a cluster's pods request and may use: its head and its workers."""
    total = Compute()
    worker, head = config.tier(record.worker_tier), config.tier(record.head_tier)
    if head is not None:
        total = total + tier_compute(head)
    if worker is not None:
        total = total + tier_compute(worker).times(record.workers)
    return total

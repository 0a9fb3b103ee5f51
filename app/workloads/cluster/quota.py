"""What a cluster holds against its owner's budget (its usage, unless it failed) and what
its pods request and may use, for its lab namespace's ResourceQuota (``app.workloads.quota``):
its head's tier once and its workers' tier per worker.
"""

from __future__ import annotations

from app.builders.resource_quota import Compute
from app.models.config import ClustersConfig, Config, HardwareTier
from app.models.usage import Usage
from app.models.workload import WorkloadStatus
from app.workloads.budgeted import Budgeted, Held
from app.workloads.cluster.models import ClusterRecord
from app.workloads.cluster.records import parse_cluster
from app.workloads.refs import CLUSTER_KIND, cluster_ref


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


def cluster_held(record: ClusterRecord, config: Config) -> Held:
    """A cluster as the budget and the quota count it: a failed one holds nothing against
    the budget, though its pods, while they stay, are the quota's."""
    failed = record.status is WorkloadStatus.FAILED
    return Held(
        kind=CLUSTER_KIND,
        name=cluster_ref(record.owner, record.name).name,
        usage=Usage() if failed else Usage.from_json(record.usage),
        compute=cluster_compute(record, config.clusters),
    )


CLUSTER_BUDGET = Budgeted(
    CLUSTER_KIND, lambda raw, config: cluster_held(parse_cluster(raw), config)
)
"""Clusters count against their owner's budget and run in their lab namespace."""

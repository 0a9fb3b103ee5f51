"""The lab namespace's ResourceQuota, made to hold the user's clusters as well as the lab.

A cluster runs in its owner's lab namespace, whose ResourceQuota admits exactly what the
namespace should hold (``app.builders.resource_quota``): the operators create the cluster's
pods, and Kubernetes refuses any the quota cannot take. So before a cluster's pods may be
made (a creation, a scale, a new tier), the quota is set to the lab's size plus every
cluster of the user at its new shape; a quota lowered below what already runs evicts nothing
(Kubernetes checks quotas when pods are created), so one write before the change serves both
ways. Budgets decide what a user may hold; the quota only lets Kubernetes admit it.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.builders.names import lab_namespace
from app.builders.resource_quota import Compute, build_namespace_quota
from app.config.models import ClustersConfig, HardwareTier
from app.models.cluster import ClusterRecord
from app.services.context import LabContext


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


def sync_lab_quota(ctx: LabContext, owner: str, clusters: Iterable[ClusterRecord]) -> bool:
    """Set ``owner``'s lab namespace quota to the lab plus ``clusters`` (every cluster of the
    owner that has or will have pods, at the shape it is to have); False when there is no
    lab to hold them."""
    lab = ctx.labs.get(owner)
    if lab is None or not lab.quotas:
        return False
    total = Compute.of_quotas(lab.quotas)
    for cluster in clusters:
        total = total + cluster_compute(cluster, ctx.config.clusters)
    namespace = lab_namespace(ctx.config.namespace_prefix, owner)
    ctx.kube.set_quota(build_namespace_quota(owner, namespace, total))
    return True

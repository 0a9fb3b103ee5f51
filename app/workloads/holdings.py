"""Everything a user holds beside their lab: the one place budgets and the lab namespace's
quota read it from.

A user's compute clusters and remote kernels run in their lab namespace and count against
one budget; the namespace's ResourceQuota must admit all their pods. Both are computed from
the same records, read once, so a check and the quota written after it agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from app.builders.resource_quota import Compute, pod_compute
from app.models.config import Config
from app.models.usage import Usage
from app.models.workload import WorkloadStatus
from app.workloads.cluster.models import ClusterRecord, parse_cluster
from app.workloads.cluster.quota import cluster_compute
from app.workloads.kernel.models import KernelRecord, parse_kernel
from app.workloads.refs import CLUSTER_KIND, KERNEL_KIND
from app.workloads.sizes import pod_size


@dataclass(frozen=True)
class Holdings:
    """One user's clusters and kernels, as their records say now."""

    owner: str
    clusters: list[ClusterRecord] = field(default_factory=list)
    kernels: list[KernelRecord] = field(default_factory=list)

    def usage(self) -> Usage:
        """What they hold against the budget: failed clusters, and kernels that ended,
        hold nothing."""
        total = Usage()
        for cluster in self.clusters:
            if cluster.status is not WorkloadStatus.FAILED:
                total = total + Usage.from_json(cluster.usage)
        for kernel in self.kernels:
            if kernel.holds:
                total = total + Usage.from_json(kernel.usage)
        return total

    def compute(self, config: Config) -> Compute:
        """What their pods request and may use, for the namespace's quota."""
        total = Compute()
        for cluster in self.clusters:
            total = total + cluster_compute(cluster, config.clusters)
        for kernel in self.kernels:
            size = pod_size(config, kernel.size) if kernel.holds else None
            if size is not None:
                total = total + pod_compute(size)
        return total

    def with_cluster(self, cluster: ClusterRecord) -> Holdings:
        """These holdings with ``cluster`` at the shape it is to have (or added)."""
        others = [c for c in self.clusters if c.name != cluster.name]
        return replace(self, clusters=[*others, cluster])

    def without_cluster(self, name: str) -> Holdings:
        return replace(self, clusters=[c for c in self.clusters if c.name != name])

    def without_kernel(self, kernel_id: str) -> Holdings:
        return replace(self, kernels=[k for k in self.kernels if k.kernel_id != kernel_id])


def holdings_of(records_of_kind: Callable[[str], dict[str, str]], owner: str) -> Holdings:
    """``owner``'s clusters and kernels, read from Redis (one read per kind) with
    ``records_of_kind``: the engine's for a service, a run's for a kind's steps."""
    prefix = f"{owner}/"
    clusters = records_of_kind(CLUSTER_KIND)
    kernels = records_of_kind(KERNEL_KIND)
    return Holdings(
        owner=owner,
        clusters=sorted(
            (parse_cluster(raw) for name, raw in clusters.items() if name.startswith(prefix)),
            key=lambda record: record.name,
        ),
        kernels=sorted(
            (parse_kernel(raw) for name, raw in kernels.items() if name.startswith(prefix)),
            key=lambda record: record.created,
        ),
    )

"""The lab namespace's ResourceQuota, made to hold the user's clusters and kernels as well as
the lab.

Clusters and kernels run in their owner's lab namespace, whose ResourceQuota admits exactly
what the namespace should hold (``app.builders.resource_quota``); Kubernetes refuses any pod
the quota cannot take. So before a cluster's or a kernel's pods may be made (a creation, a
scale, a new tier), the quota is set to the lab's size plus everything the user holds at its
new shape; a quota lowered below what already runs evicts nothing (Kubernetes checks quotas
when pods are created), so one write before the change serves both ways. Budgets decide what
a user may hold; the quota only lets Kubernetes admit it.
"""

from __future__ import annotations

from app.builders.names import lab_namespace
from app.builders.resource_quota import Compute, build_namespace_quota
from app.workloads.context import WorkloadContext
from app.workloads.holdings import Holdings


def sync_lab_quota(ctx: WorkloadContext, holdings: Holdings) -> bool:
    """Set the owner's lab namespace quota to the lab plus ``holdings`` (each as it is to be);
    False when there is no lab to hold them, its namespace gone or being deleted (a deletion
    that ends then has nothing to give back)."""
    owner = holdings.owner
    lab = ctx.labs.get(owner)
    if lab is None or not lab.quotas:
        return False
    total = Compute.of_quotas(lab.quotas) + holdings.compute()
    namespace = lab_namespace(ctx.config.namespace_prefix, owner)
    return ctx.kube.set_quota(build_namespace_quota(owner, namespace, total)) is not None

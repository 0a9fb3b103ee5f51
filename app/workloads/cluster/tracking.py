"""How cluster records follow Kubernetes between operations (see ``app.engine.tracking``).

The engine tracks one pod per workload; a cluster's is its head, which every adapter's pods
carry a label for. A head pod that goes does not mean the cluster went: its operator makes
it again (a Deployment's pod, a restarted head). So a missing head is judged by the cluster
object: while it exists the record stands; once it is gone (deleted behind the service's
back, or with the lab's namespace) the record says the cluster failed, and why. A head that
keeps crashing (CrashLoopBackOff) or cannot be pulled fails the cluster too, with the reason
and the last exit code, whether it was starting or had run. A starting
cluster whose head becomes ready is running; a running one's workers and tiers are those of
its object. A record Redis lost is made again from the cluster object
(``records.record_from_object``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.engine.pods import judge
from app.models.workload import WorkloadStatus
from app.workloads.beside_lab import BesideLabTracking
from app.workloads.cluster.adapters import (
    ADAPTERS,
    CLUSTER_LABEL,
    KIND_LABEL,
    OWNER_LABEL,
    ROLE_LABEL,
)
from app.workloads.cluster.models import ClusterRecord
from app.workloads.cluster.records import (
    cluster_json,
    custom_kind,
    parse_cluster,
    reachable_at,
    record_from_object,
)

HEAD_SELECTOR = f"{ROLE_LABEL}=head,{CLUSTER_LABEL},{OWNER_LABEL}"
"""Every cluster head pod the service's clusters have, in any namespace."""

GONE_ERROR = "the cluster's object is gone (deleted outside the service, or with the lab)"


class ClusterTracking(BesideLabTracking):
    """A cluster is followed through its head pod (``owner/cluster``)."""

    selector = HEAD_SELECTOR
    owner_label = OWNER_LABEL
    name_label = CLUSTER_LABEL

    def assess(self, record: str, pod: dict[str, Any] | None) -> str | None:
        current = parse_cluster(record)
        if current.status in (WorkloadStatus.FAILED, WorkloadStatus.TERMINATING):
            return None
        if pod is None:
            adapter = ADAPTERS.get(current.kind)
            if adapter is not None and self._kube.read_custom(
                custom_kind(adapter), current.namespace, current.name
            ):
                return None  # its operator makes the head again
            return cluster_json(replace(current, status=WorkloadStatus.FAILED, error=GONE_ERROR))
        verdict = judge(pod, "cluster head")
        if verdict.failure is not None and not verdict.ready:
            # A head that keeps crashing (or whose image is gone) serves nothing, however
            # often its operator or the kubelet starts it again: the cluster has failed.
            return cluster_json(
                replace(current, status=WorkloadStatus.FAILED, error=verdict.failure)
            )
        if current.status is WorkloadStatus.RUNNING:
            return self._in_step(current)
        if current.status is WorkloadStatus.STARTING and verdict.ready:
            scheduler, dashboard = reachable_at(
                self._kube,
                self._config.clusters,
                ADAPTERS[current.kind],
                current.name,
                current.namespace,
            )
            running = replace(
                current,
                status=WorkloadStatus.RUNNING,
                scheduler_address=scheduler,
                dashboard_url=dashboard,
            )
            return cluster_json(running)
        return None

    def _in_step(self, current: ClusterRecord) -> str | None:
        """The record with the workers, maximum and tiers its object has, where they differ.

        The object is what its operator runs; the record follows it. They differ when a
        change reached Kubernetes but the service stopped before it wrote the record (a
        scale cut off by a restart): the record is then mended here, so the budget counts
        what runs.
        """
        adapter = ADAPTERS.get(current.kind)
        if adapter is None:
            return None
        obj = self._kube.read_custom(custom_kind(adapter), current.namespace, current.name)
        if obj is None:
            return None
        addresses = (current.scheduler_address or "", current.dashboard_url or "")
        found = record_from_object(
            adapter, obj, self._config.clusters, running=True, addresses=addresses
        )
        if found is None:
            return None
        mended = replace(
            current,
            workers=found.workers,
            max_workers=found.max_workers,
            worker_tier=found.worker_tier,
            head_tier=found.head_tier,
            usage=found.usage,
        )
        return None if mended == current else cluster_json(mended)

    def rebuild(self, pod: dict[str, Any]) -> str | None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        adapter = ADAPTERS.get(str(labels.get(KIND_LABEL)))
        if adapter is None or meta.get("deletionTimestamp"):
            return None
        namespace, name = str(meta.get("namespace")), str(labels.get(CLUSTER_LABEL))
        obj = self._kube.read_custom(custom_kind(adapter), namespace, name)
        if obj is None:
            return None
        clusters = self._config.clusters
        record = record_from_object(
            adapter,
            obj,
            clusters,
            running=judge(pod, "cluster head").ready,
            addresses=reachable_at(self._kube, clusters, adapter, name, namespace),
        )
        return cluster_json(record) if record is not None else None

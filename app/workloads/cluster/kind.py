"""Compute clusters as a kind of workload: create the operator's object, follow its head.

A spawn creates the cluster object its adapter builds (or adopts the one this cluster's
earlier run created), waits for the operator to make the head pod and follows that pod until
it is ready, failing fast as a lab does (an image that cannot be pulled, no node that fits,
a crash loop). A spawn whose spec names a change (a scale, a tier, a head restart, queued by
the scaler with the cluster's new record) applies it instead (``changes``); a change that
fails leaves the record as it was queued (a running cluster stays running), for the tracking
to keep in step with the object. A delete removes the object and waits until the head is
gone: the operator and Kubernetes' garbage collector take the rest.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import Any

from app.engine.following import PodToFollow, follow_until_ready
from app.engine.kind import Finished, Run, StepFailed
from app.models.workload import WorkloadStatus
from app.storage.kubernetes import KubernetesError, KubernetesStorage
from app.workloads.cluster.adapters import (
    ADAPTERS,
    OWNER_LABEL,
    ClusterAdapter,
    ClusterShape,
    PodShape,
)
from app.workloads.cluster.changes import apply_change, is_change
from app.workloads.cluster.quota import CLUSTER_BUDGET
from app.workloads.cluster.records import cluster_json, custom_kind, parse_cluster, reachable_at
from app.workloads.cluster.tracking import ClusterTracking
from app.workloads.holdings import holdings_of
from app.workloads.kind import ServiceKind
from app.workloads.quota import sync_lab_quota
from app.workloads.refs import CLUSTER_KIND, cluster_ref

__all__ = ["CLUSTER_KIND", "ClusterKind", "cluster_ref", "create_or_adopt"]

HEAD_POLL_SECONDS = 0.25
"""How often a spawn looks for the head pod until the operator has made it."""


def shape_to_json(shape: ClusterShape) -> dict[str, Any]:
    return asdict(shape)


def shape_from_json(data: dict[str, Any]) -> ClusterShape:
    return ClusterShape(
        **{
            **data,
            "worker": PodShape(**data["worker"]),
            "head": PodShape(**data["head"]),
        }
    )


def selector_text(labels: dict[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


class ClusterKind(ServiceKind):
    """A user's compute cluster, named ``owner/name`` in the engine."""

    name = CLUSTER_KIND
    admitted = True
    tracked_by = ClusterTracking
    budget = CLUSTER_BUDGET
    # Their operators may hold them with finalizers, as the Dask operator holds every
    # DaskCluster with kopf's.
    operator_objects = tuple(custom_kind(adapter) for adapter in ADAPTERS.values())

    def spawn(self, run: Run) -> Finished:
        assert run.operation.spec is not None
        if is_change(run.operation.spec):
            return apply_change(self._ctx.kube, run)
        adapter = ADAPTERS[str(run.operation.spec["kind"])]
        shape = shape_from_json(run.operation.spec["shape"])
        kube, reporter = self._ctx.kube, run.reporter
        # The lab namespace's quota first, so that Kubernetes admits the cluster's pods.
        if not sync_lab_quota(
            self._ctx, holdings_of(self._ctx, run.workloads.records, shape.owner)
        ):
            raise StepFailed(f"user {shape.owner} has no lab to run the cluster beside")
        reporter.info(f"Creating {adapter.kind} {shape.name}", progress=10)
        create_or_adopt(kube, adapter, shape)
        reporter.info("Waiting for the operator to start the cluster's head", progress=30)
        with run.waiting():
            head = _wait_for_head(kube, run, adapter, shape)
            pod = PodToFollow(shape.namespace, head["metadata"]["name"], noun="cluster head")
            follow_until_ready(kube, reporter, pod, head)
        current = run.workloads.current()
        if current is None:
            raise StepFailed("the cluster's record is gone")
        scheduler, dashboard = reachable_at(
            kube, self._ctx.config.clusters, adapter, shape.name, shape.namespace
        )
        record = replace(
            parse_cluster(current),
            status=WorkloadStatus.RUNNING,
            scheduler_address=scheduler,
            dashboard_url=dashboard,
            error=None,
        )
        run.reporter.closing("The cluster is running")
        return Finished(cluster_json(record))

    def delete(self, run: Run) -> Finished:
        owner, _, name = run.operation.ref.name.partition("/")
        current = run.workloads.current()
        if current is None:
            return Finished(None)
        record = parse_cluster(current)
        adapter = ADAPTERS[record.kind]
        kube = self._ctx.kube
        kube.delete_custom(custom_kind(adapter), record.namespace, name)
        run.reporter.info(f"Deleted {adapter.kind} {name}; waiting for its head to go")
        selector = selector_text(adapter.head_selector(name))
        with run.waiting():
            while kube.list_pods(record.namespace, selector):
                run.reporter.check()
                time.sleep(HEAD_POLL_SECONDS)
        holdings = holdings_of(self._ctx, run.workloads.records, owner)
        sync_lab_quota(self._ctx, holdings.without(CLUSTER_KIND, run.operation.ref.name))
        run.reporter.closing(f"Cluster {name} of {owner} deleted")
        return Finished(None)

    def failed_record(self, run: Run, message: str) -> str | None:
        current = run.workloads.current()
        if current is None or is_change(run.operation.spec):
            return current
        failed = replace(parse_cluster(current), status=WorkloadStatus.FAILED, error=message)
        return cluster_json(failed)


def create_or_adopt(kube: KubernetesStorage, adapter: ClusterAdapter, shape: ClusterShape) -> None:
    """Create the cluster object; one of that name already there is adopted only if it is the
    owner's (a run resumed after its worker died)."""
    kind = custom_kind(adapter)
    try:
        kube.create_custom(kind, adapter.build(shape))
    except KubernetesError as exc:
        if exc.status != 409:
            raise
        existing = kube.read_custom(kind, shape.namespace, shape.name) or {}
        labels = existing.get("metadata", {}).get("labels") or {}
        if labels.get(OWNER_LABEL) != shape.owner:
            raise StepFailed(
                f"{adapter.kind} {shape.name} exists and is not this cluster"
            ) from None


def _wait_for_head(
    kube: KubernetesStorage, run: Run, adapter: ClusterAdapter, shape: ClusterShape
) -> dict[str, Any]:
    """The head pod, once the operator has made it."""
    selector = selector_text(adapter.head_selector(shape.name))
    while True:
        pods = [
            p
            for p in kube.list_pods(shape.namespace, selector)
            if not p["metadata"].get("deletionTimestamp")
        ]
        if pods:
            return pods[0]
        run.reporter.check()
        time.sleep(HEAD_POLL_SECONDS)

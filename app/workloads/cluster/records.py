"""Cluster records as the engine stores them, from what Kubernetes holds, and the pod shape
a hardware tier gives.

A record is stored as its schema (``ClusterSchema``, the routes' body) dumps it. The service
writes a cluster's record when it creates the cluster; when Redis lost it, the
record is made again from the cluster object: its owner label, the tiers annotation, the
worker counts where its adapter says they live, the head's image, and whether its head pod is
ready. What it holds against the budget follows from the tiers, as at creation.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from app.models.config import ClustersConfig, HardwareTier
from app.models.usage import Usage, cluster_usage
from app.models.workload import WorkloadStatus
from app.schemas.records import RecordText
from app.storage.kubernetes import CustomKind, KubernetesStorage
from app.workloads.cluster.adapters import (
    OWNER_LABEL,
    TIERS_ANNOTATION,
    ClusterAdapter,
    PodShape,
    resolve,
)
from app.workloads.cluster.models import ClusterRecord
from app.workloads.cluster.schemas import ClusterSchema

CLUSTER_TEXT = RecordText(ClusterRecord, ClusterSchema)
"""A cluster's record as the engine stores it."""
cluster_json = CLUSTER_TEXT.dump
parse_cluster = CLUSTER_TEXT.parse


def custom_kind(adapter: ClusterAdapter) -> CustomKind:
    """Where the API serves the adapter's resource."""
    return CustomKind(adapter.group, adapter.version, adapter.plural)


def pod_shape(tier: HardwareTier, node_pool_label: str) -> PodShape:
    """What a pod given ``tier`` requests and where it runs."""
    return PodShape(
        cpu_request=tier.cores,
        cpu_limit=tier.cores_limit,
        memory=tier.memory,
        gpus=tier.gpus,
        node_selector={node_pool_label: tier.node_pool} if tier.node_pool else {},
        tier_id=tier.id,
        tier=tier.name,
    )


def reachable_at(
    kube: KubernetesStorage,
    config: ClustersConfig,
    adapter: ClusterAdapter,
    name: str,
    namespace: str,
) -> tuple[str, str]:
    """The cluster's scheduler address and dashboard, as ``config.reach_by`` says to name
    the head Service; by its DNS name while a Service without a cluster IP is all there is."""
    if config.reach_by == "clusterIP":
        service = kube.read_service(namespace, adapter.service_name(name)) or {}
        ip = (service.get("spec") or {}).get("clusterIP")
        if ip and ip != "None":
            return adapter.addresses_at(str(ip))
    return adapter.addresses(name, namespace)


def record_from_object(
    adapter: ClusterAdapter,
    obj: dict[str, Any],
    config: ClustersConfig,
    *,
    running: bool,
    addresses: tuple[str, str],
) -> ClusterRecord | None:
    """The record of the cluster ``obj`` is; None when it is not one the service made."""
    meta = obj.get("metadata") or {}
    owner = (meta.get("labels") or {}).get(OWNER_LABEL)
    try:
        tiers = json.loads((meta.get("annotations") or {}).get(TIERS_ANNOTATION) or "")
    except ValueError:
        return None
    if not owner or not isinstance(tiers, dict):
        return None
    workers = adapter.workers(obj)
    worker, head = config.tier(str(tiers.get("worker"))), config.tier(str(tiers.get("head")))
    usage = Usage(clusters=1, workers=workers)
    if worker is not None and head is not None:
        label = config.node_pool_label
        shapes = pod_shape(worker, label), pod_shape(head, label)
        usage = cluster_usage(workers, shapes[0].requested(), shapes[1].requested())
    name, namespace = str(meta["name"]), str(meta.get("namespace"))
    scheduler, dashboard = addresses
    image = resolve(obj, f"{adapter.head_template_path}/spec/containers/0/image")
    return ClusterRecord(
        kind=adapter.route_name,
        name=name,
        namespace=namespace,
        owner=str(owner),
        status=WorkloadStatus.RUNNING if running else WorkloadStatus.STARTING,
        workers=workers,
        max_workers=adapter.max_workers(obj),
        worker_tier=str(tiers.get("worker")),
        head_tier=str(tiers.get("head")),
        image=str(image or ""),
        usage=asdict(usage),
        scheduler_address=scheduler if running else None,
        dashboard_url=dashboard if running else None,
    )

"""What the service must know of each kind of compute cluster, in one adapter per kind.

The service runs clusters through the operators people already run (dask-kubernetes, KubeRay,
the Kubeflow Spark operator). Each operator's resource keeps the worker count, the maximum, the
worker's and the head's pod specs in places of its own, and finds its head pod its own way. An
adapter says where, so that creating, scaling, budgets, hardware tiers and head restarts are
written once. Adding a kind of cluster is adding one adapter to ``ADAPTERS``.

Places are JSON pointers (RFC 6901) into the object: a change is a JSON patch of exactly the
fields it means, so a scale never rewrites a list of worker groups it does not touch.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from app.builders.resource_quota import GPU_RESOURCE
from app.models.usage import Usage, cluster_usage

OWNER_LABEL = "lab-spawner.jupyter.org/user"
"""The username of a cluster's owner, on the cluster object and every pod template."""

MAX_WORKERS_ANNOTATION = "lab-spawner.jupyter.org/max-workers"
"""Where the maximum lives for a kind whose resource has no field for it."""

TIER_LABEL = "lab-spawner.jupyter.org/hardware-tier-id"
"""The hardware tier a pod template was given (the seed's ``hardware-tier-id`` label)."""

CLUSTER_LABEL = "lab-spawner.jupyter.org/cluster"
KIND_LABEL = "lab-spawner.jupyter.org/cluster-kind"
ROLE_LABEL = "lab-spawner.jupyter.org/cluster-role"
"""On every pod of a cluster: its cluster's name and kind, and ``head`` or ``worker``, so that
the service finds a cluster's head the same way for every kind of operator."""

TIERS_ANNOTATION = "lab-spawner.jupyter.org/tiers"
"""On the cluster object: the names of the tiers it was given (JSON), for a record rebuilt
from Kubernetes."""


@dataclass(frozen=True)
class PodShape:
    """The resources and placement a hardware tier gives one kind of pod."""

    cpu_request: float
    cpu_limit: float
    memory: int
    gpus: int = 0
    node_selector: dict[str, str] = field(default_factory=dict)
    tier_id: str = ""
    tier: str = ""
    """The tier's name."""

    def requested(self) -> tuple[float, int, int]:
        """What the pod requests: cores, memory, GPUs."""
        return self.cpu_request, self.memory, self.gpus

    def resources(self) -> dict[str, Any]:
        requests: dict[str, Any] = {"cpu": _cores(self.cpu_request), "memory": str(self.memory)}
        limits: dict[str, Any] = {"cpu": _cores(self.cpu_limit), "memory": str(self.memory)}
        if self.gpus:
            requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = str(self.gpus)
        return {"requests": requests, "limits": limits}


@dataclass(frozen=True)
class ClusterShape:
    """A cluster as a user asked for it, once checked: everything an adapter builds from."""

    name: str
    namespace: str
    owner: str
    uid: int
    gid: int
    image: str
    workers: int
    max_workers: int
    worker: PodShape
    head: PodShape

    def usage(self) -> Usage:
        """What the cluster holds against its owner's budget (``cluster_usage``)."""
        return cluster_usage(self.workers, self.worker.requested(), self.head.requested())


@dataclass(frozen=True)
class TemplateCopy:
    """A pod template an operator copied from the cluster's when it made an object of its
    own, which keeps what it was made with: where a new tier must be written too for the
    next pod made from it to take the tier."""

    group: str
    version: str
    plural: str
    name: str
    path: str
    """JSON pointer to the copy's pod template (``metadata``, ``spec``)."""
    extra: tuple[tuple[str, Any], ...] = ()
    """Further (pointer, value) pairs the copy is given with the tier."""
    labelled: bool = True
    """Whether the copy's labels take the tier label; not where a selector holds them."""

    def patch(self, copy: dict[str, Any], source: dict[str, Any]) -> list[dict[str, Any]]:
        """The JSON patch giving ``copy`` the first container's resources, the node selector
        and the tier label of the cluster's pod template ``source``."""
        spec = source.get("spec") or {}
        containers = spec.get("containers") or [{}]
        labels = dict(resolve(copy, f"{self.path}/metadata/labels") or {})
        tier = ((source.get("metadata") or {}).get("labels") or {}).get(TIER_LABEL)
        if tier is not None:
            labels[TIER_LABEL] = tier
        ops: list[dict[str, Any]] = [
            {
                "op": "add",
                "path": f"{self.path}/spec/containers/0/resources",
                "value": containers[0].get("resources") or {},
            },
            {
                "op": "add",
                "path": f"{self.path}/spec/nodeSelector",
                "value": dict(spec.get("nodeSelector") or {}),
            },
        ]
        if self.labelled:
            where = f"{self.path}/metadata"
            if resolve(copy, where) is None:
                ops.append({"op": "add", "path": where, "value": {"labels": labels}})
            else:
                ops.append({"op": "add", "path": f"{where}/labels", "value": labels})
        ops.extend({"op": "add", "path": path, "value": value} for path, value in self.extra)
        return ops


class ClusterAdapter(ABC):
    """One kind of cluster: its resource, where things live in it, how its head is found."""

    plural: str
    """The kind's name in routes (``/clusters``, the scaler API) and its resource's plural."""
    route_name: str
    group: str
    version: str
    kind: str
    replicas_path: str
    """JSON pointer to the requested worker count."""
    max_path: str | None
    """JSON pointer to the maximum worker count; None: the resource has none, and the
    service keeps it in ``MAX_WORKERS_ANNOTATION``."""
    worker_template_path: str
    """JSON pointer to the workers' pod template (``metadata`` and ``spec``)."""
    head_template_path: str
    """JSON pointer to the head's (scheduler's, server's) pod template."""

    @abstractmethod
    def build(self, shape: ClusterShape) -> dict[str, Any]:
        """The cluster object for ``shape``, ready to create."""

    @abstractmethod
    def head_selector(self, name: str) -> dict[str, str]:
        """Labels that select the head pod of cluster ``name``, as its operator sets them."""

    @abstractmethod
    def service_name(self, name: str) -> str:
        """The name of the Service its operator puts in front of cluster ``name``'s head."""

    @abstractmethod
    def addresses_at(self, host: str) -> tuple[str, str]:
        """Where a client reaches the cluster (the scheduler's address), and its dashboard,
        when the head Service is at ``host``."""

    def worker_template_copies(self, name: str) -> list[TemplateCopy]:
        """Where the operator keeps copies of the workers' template for cluster ``name``;
        none when it makes every worker from the cluster object itself."""
        return []

    def head_template_copies(self, name: str) -> list[TemplateCopy]:
        """Where the operator keeps copies of the head's template (taken at a restart)."""
        return []

    def addresses(self, name: str, namespace: str) -> tuple[str, str]:
        """The addresses by the head Service's DNS name, as a pod in the cluster reaches it."""
        return self.addresses_at(f"{self.service_name(name)}.{namespace}")

    # ---- reading and changing an object ---------------------------------------------------

    def workers(self, obj: dict[str, Any]) -> int:
        return int(resolve(obj, self.replicas_path) or 0)

    def max_workers(self, obj: dict[str, Any]) -> int:
        if self.max_path is None:
            annotations = obj.get("metadata", {}).get("annotations") or {}
            return int(annotations.get(MAX_WORKERS_ANNOTATION) or self.workers(obj))
        return int(resolve(obj, self.max_path) or 0)

    def scale_patch(self, workers: int) -> list[dict[str, Any]]:
        """The JSON patch that sets the worker count (never the maximum)."""
        return [{"op": "replace", "path": self.replicas_path, "value": workers}]

    def tier_patch(
        self, obj: dict[str, Any], template_path: str, shape: PodShape
    ) -> list[dict[str, Any]]:
        """The JSON patch giving the pod template at ``template_path`` a hardware tier: the
        first container's resources, the node selector and the tier label."""
        template = resolve(obj, template_path) or {}
        containers = (template.get("spec") or {}).get("containers") or []
        if not containers:
            raise ValueError(f"{self.kind} has no container at {template_path}/spec")
        ops: list[dict[str, Any]] = [
            {
                "op": "add",
                "path": f"{template_path}/spec/containers/0/resources",
                "value": shape.resources(),
            },
            {
                "op": "add",
                "path": f"{template_path}/spec/nodeSelector",
                "value": dict(shape.node_selector),
            },
        ]
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        labels[TIER_LABEL] = shape.tier_id
        if "metadata" not in template:
            ops.append(
                {"op": "add", "path": f"{template_path}/metadata", "value": {"labels": labels}}
            )
        else:
            ops.append({"op": "add", "path": f"{template_path}/metadata/labels", "value": labels})
        return ops

    def tiers_patch(self, obj: dict[str, Any], *, worker: str, head: str) -> list[dict[str, Any]]:
        """The JSON patch recording the tiers' names on the object (``TIERS_ANNOTATION``), so
        a record rebuilt from Kubernetes has the tiers the pods were given."""
        value = tiers_annotation(worker=worker, head=head)
        if "annotations" not in obj.get("metadata", {}):
            return [
                {"op": "add", "path": "/metadata/annotations", "value": {TIERS_ANNOTATION: value}}
            ]
        key = TIERS_ANNOTATION.replace("~", "~0").replace("/", "~1")
        return [{"op": "add", "path": f"/metadata/annotations/{key}", "value": value}]

    # ---- helpers for builders ---------------------------------------------------------------

    def resource(self, shape: ClusterShape, spec: dict[str, Any]) -> dict[str, Any]:
        """The whole object of this kind for ``shape``, around its ``spec``."""
        return {
            "apiVersion": f"{self.group}/{self.version}",
            "kind": self.kind,
            "metadata": self.metadata(shape),
            "spec": spec,
        }

    def metadata(self, shape: ClusterShape) -> dict[str, Any]:
        annotations = {
            TIERS_ANNOTATION: tiers_annotation(worker=shape.worker.tier, head=shape.head.tier)
        }
        if self.max_path is None:
            annotations[MAX_WORKERS_ANNOTATION] = str(shape.max_workers)
        return {
            "name": shape.name,
            "namespace": shape.namespace,
            "labels": {OWNER_LABEL: shape.owner, "app.kubernetes.io/managed-by": "lab-spawner"},
            "annotations": annotations,
        }

    def template(
        self, shape: ClusterShape, pod: PodShape, container: dict[str, Any], *, role: str
    ) -> dict[str, Any]:
        """A pod template running ``container`` as the owner, with ``pod``'s tier; ``role``
        is ``head`` or ``worker``."""
        spec: dict[str, Any] = {
            "securityContext": {
                "runAsUser": shape.uid,
                "runAsGroup": shape.gid,
                "runAsNonRoot": True,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "image": shape.image,
                    "imagePullPolicy": "IfNotPresent",
                    **container,
                    "env": [
                        {
                            "name": "POD_IP",
                            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                        },
                        *container.get("env", []),
                    ],
                    "resources": pod.resources(),
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        }
        if pod.node_selector:
            spec["nodeSelector"] = dict(pod.node_selector)
        labels = {
            OWNER_LABEL: shape.owner,
            TIER_LABEL: pod.tier_id,
            CLUSTER_LABEL: shape.name,
            KIND_LABEL: self.route_name,
            ROLE_LABEL: role,
        }
        return {"metadata": {"labels": labels}, "spec": spec}


def tiers_annotation(*, worker: str, head: str) -> str:
    """``TIERS_ANNOTATION``'s value: the workers' and the head's tier names."""
    return json.dumps({"worker": worker, "head": head}, sort_keys=True)


def resolve(obj: Any, pointer: str) -> Any:
    """The value at a JSON pointer, or None where the path does not exist."""
    current = obj
    for part in pointer.lstrip("/").split("/") if pointer else []:
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(current, list) and key.isdigit() and int(key) < len(current):
            current = current[int(key)]
        elif isinstance(current, dict) and key in current:
            current = current[key]
        else:
            return None
    return current


def _cores(cores: float) -> str:
    millicores = round(cores * 1000)
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


class DaskAdapter(ClusterAdapter):
    """dask-kubernetes' DaskCluster: ``spec.worker`` and ``spec.scheduler`` are pod templates
    of their own shape (``metadata``, ``spec``), the count is ``spec.worker.replicas``, and
    the resource has no maximum."""

    plural = route_name = "daskclusters"
    group, version, kind = "kubernetes.dask.org", "v1", "DaskCluster"
    replicas_path = "/spec/worker/replicas"
    max_path = None
    worker_template_path = "/spec/worker"
    head_template_path = "/spec/scheduler"

    def build(self, shape: ClusterShape) -> dict[str, Any]:
        scheduler = self.template(
            shape,
            shape.head,
            role="head",
            container={
                "name": "scheduler",
                "args": [
                    "dask",
                    "scheduler",
                    "--host",
                    "$(POD_IP)",
                    "--port",
                    "8786",
                    "--dashboard-address",
                    "$(POD_IP):8787",
                ],
                "ports": [
                    {"name": "tcp-comm", "containerPort": 8786, "protocol": "TCP"},
                    {"name": "http-dashboard", "containerPort": 8787, "protocol": "TCP"},
                ],
                "readinessProbe": {"tcpSocket": {"port": "tcp-comm"}, "periodSeconds": 1},
            },
        )
        worker = self.template(
            shape,
            shape.worker,
            role="worker",
            container={
                "name": "worker",
                "args": [
                    "dask",
                    "worker",
                    "--name",
                    "$(DASK_WORKER_NAME)",
                    "--host",
                    "$(POD_IP)",
                    "--nthreads",
                    str(max(1, int(shape.worker.cpu_limit))),
                    "--no-dashboard",
                ],
            },
        )
        service = {
            "type": "ClusterIP",
            "selector": self.head_selector(shape.name),
            "ports": [
                {"name": "tcp-comm", "port": 8786, "targetPort": "tcp-comm", "protocol": "TCP"},
                {
                    "name": "http-dashboard",
                    "port": 8787,
                    "targetPort": "http-dashboard",
                    "protocol": "TCP",
                },
            ],
        }
        return self.resource(
            shape,
            {
                "worker": {"replicas": shape.workers, **worker},
                "scheduler": {**scheduler, "service": service},
            },
        )

    def head_selector(self, name: str) -> dict[str, str]:
        return {"dask.org/cluster-name": name, "dask.org/component": "scheduler"}

    def worker_template_copies(self, name: str) -> list[TemplateCopy]:
        # The operator makes the DaskWorkerGroup once, from the cluster's worker template,
        # and each new worker's Deployment from the group's: a tier goes to the group too.
        return [
            TemplateCopy(
                "kubernetes.dask.org", "v1", "daskworkergroups", f"{name}-default", "/spec/worker"
            )
        ]

    def head_template_copies(self, name: str) -> list[TemplateCopy]:
        # The scheduler is a Deployment the operator made once; a restart makes its pod
        # from the Deployment's template. Recreate: two schedulers must never run at once
        # (workers would split between them), so the old one goes before the new one starts.
        return [
            TemplateCopy(
                "apps",
                "v1",
                "deployments",
                f"{name}-scheduler",
                "/spec/template",
                extra=(("/spec/strategy", {"type": "Recreate"}),),
                # Its selector is its template's labels, tier label included, and immutable.
                labelled=False,
            )
        ]

    def service_name(self, name: str) -> str:
        return f"{name}-scheduler"

    def addresses_at(self, host: str) -> tuple[str, str]:
        return f"tcp://{host}:8786", f"http://{host}:8787/status"


class RayAdapter(ClusterAdapter):
    """KubeRay's RayCluster: one worker group, whose ``replicas`` and ``maxReplicas`` are the
    count and the maximum; the head is ``spec.headGroupSpec``."""

    plural = route_name = "rayclusters"
    group, version, kind = "ray.io", "v1", "RayCluster"
    replicas_path = "/spec/workerGroupSpecs/0/replicas"
    max_path = "/spec/workerGroupSpecs/0/maxReplicas"
    worker_template_path = "/spec/workerGroupSpecs/0/template"
    head_template_path = "/spec/headGroupSpec/template"

    def build(self, shape: ClusterShape) -> dict[str, Any]:
        head = self.template(
            shape,
            shape.head,
            role="head",
            container={
                "name": "ray-head",
                "ports": [
                    {"name": "gcs-server", "containerPort": 6379, "protocol": "TCP"},
                    {"name": "dashboard", "containerPort": 8265, "protocol": "TCP"},
                    {"name": "client", "containerPort": 10001, "protocol": "TCP"},
                ],
            },
        )
        worker = self.template(shape, shape.worker, {"name": "ray-worker"}, role="worker")
        return self.resource(
            shape,
            {
                "headGroupSpec": {
                    "rayStartParams": {"dashboard-host": "0.0.0.0"},
                    "template": head,
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "workers",
                        "replicas": shape.workers,
                        "minReplicas": 0,
                        "maxReplicas": shape.max_workers,
                        "rayStartParams": {},
                        "template": worker,
                    }
                ],
            },
        )

    def head_selector(self, name: str) -> dict[str, str]:
        return {"ray.io/cluster": name, "ray.io/node-type": "head"}

    def service_name(self, name: str) -> str:
        return f"{name}-head-svc"

    def addresses_at(self, host: str) -> tuple[str, str]:
        return f"ray://{host}:10001", f"http://{host}:8265"


class SparkAdapter(ClusterAdapter):
    """The Kubeflow Spark operator's SparkConnect, served as the seed's ``sparkclusters``: the
    executors are the workers (``spec.executor.instances``), their maximum is dynamic
    allocation's ``maxExecutors``, and the head is the Spark Connect server."""

    route_name = "sparkclusters"
    plural = "sparkconnects"
    group, version, kind = "sparkoperator.k8s.io", "v1alpha1", "SparkConnect"
    replicas_path = "/spec/executor/instances"
    max_path = "/spec/dynamicAllocation/maxExecutors"
    worker_template_path = "/spec/executor/template"
    head_template_path = "/spec/server/template"
    spark_version = "4.0.0"

    def build(self, shape: ClusterShape) -> dict[str, Any]:
        server = self.template(shape, shape.head, {"name": "spark-kubernetes-driver"}, role="head")
        executor = self.template(
            shape, shape.worker, {"name": "spark-kubernetes-executor"}, role="worker"
        )
        return self.resource(
            shape,
            {
                "sparkVersion": self.spark_version,
                "image": shape.image,
                "server": {**_spark_size(shape.head), "template": server},
                "executor": {
                    **_spark_size(shape.worker),
                    "instances": shape.workers,
                    "template": executor,
                },
                "dynamicAllocation": {"enabled": False, "maxExecutors": shape.max_workers},
            },
        )

    def head_selector(self, name: str) -> dict[str, str]:
        return {"sparkoperator.k8s.io/connect-name": name, "spark-role": "connect-server"}

    def service_name(self, name: str) -> str:
        return f"{name}-server"

    def addresses_at(self, host: str) -> tuple[str, str]:
        return f"sc://{host}:15002", f"http://{host}:4040"


def _spark_size(pod: PodShape) -> dict[str, Any]:
    """Spark's own sizing: whole cores and memory in MiB."""
    return {"cores": max(1, round(pod.cpu_request)), "memory": f"{max(1, pod.memory // 2**20)}m"}


ADAPTERS: dict[str, ClusterAdapter] = {
    adapter.route_name: adapter for adapter in (DaskAdapter(), RayAdapter(), SparkAdapter())
}
"""Every kind of cluster, by its name in routes."""

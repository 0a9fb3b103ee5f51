"""KubeRay, for ``RayCluster`` (``ray.io/v1``).

KubeRay creates bare pods: the head ``N-head-<suffix>`` and, per worker group, replicas
``N-<group>-worker-<suffix>`` (clamped to the group's minimum and maximum), all labelled
``ray.io/cluster=N``, ``ray.io/node-type=head|worker``, ``ray.io/group`` (``headgroup`` for the
head), ``ray.io/is-ray-node=yes`` and ``ray.io/identifier``; and the headless Service
``N-head-svc`` selecting the head. Its status says ``state: ready`` once every pod is running
and ready, with the worker counts and where the head is.
"""

from __future__ import annotations

from typing import Any

from ..cache import Obj
from ..daemonsets import random_suffix
from ..podstatus import is_pod_ready
from .base import Member, OperatorSimulation, member_keys

CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
DEFAULT_PORTS = {
    "client": 10001,
    "gcs-server": 6379,
    "dashboard": 8265,
    "metrics": 8080,
    "serve": 8000,
}


class RayOperator(OperatorSimulation):
    plural = "rayclusters"
    group = "ray.io"
    version = "v1"
    kind = "RayCluster"
    owner_label = CLUSTER_LABEL

    def _labels(
        self, obj: Obj, template: dict[str, Any], node_type: str, group: str
    ) -> dict[str, str]:
        name = str(obj["metadata"]["name"])
        return {
            **((template.get("metadata") or {}).get("labels") or {}),
            CLUSTER_LABEL: name,
            NODE_TYPE_LABEL: node_type,
            GROUP_LABEL: group,
            "ray.io/is-ray-node": "yes",
            "ray.io/identifier": f"{name}-{node_type}",
            "app.kubernetes.io/name": "kuberay",
            "app.kubernetes.io/created-by": "kuberay-operator",
        }

    def members(self, obj: Obj, current: list[Obj]) -> list[Member]:
        name = str(obj["metadata"]["name"])
        spec = obj.get("spec") or {}
        head = (spec.get("headGroupSpec") or {}).get("template") or {}
        members = [
            Member(
                key="head",
                name=lambda: f"{name}-head-{random_suffix()}",
                labels=self._labels(obj, head, "head", "headgroup"),
                spec=dict(head.get("spec") or {}),
            )
        ]
        keys = member_keys(current)
        for group in spec.get("workerGroupSpecs") or []:
            group_name = str(group.get("groupName"))
            template = group.get("template") or {}
            low, high = int(group.get("minReplicas") or 0), int(group.get("maxReplicas") or 0)
            wanted = min(max(int(group.get("replicas") or 0), low), high)
            prefix = f"worker:{group_name}:"
            taken = sorted(int(k[len(prefix) :]) for k in keys if k.startswith(prefix))
            indices = taken[:wanted]
            spare = (i for i in range(len(taken) + wanted) if i not in taken)
            while len(indices) < wanted:
                indices.append(next(spare))
            for index in indices:
                members.append(
                    Member(
                        key=f"{prefix}{index}",
                        name=_worker_name(name, group_name),
                        labels=self._labels(obj, template, "worker", group_name),
                        spec=dict(template.get("spec") or {}),
                    )
                )
        return members

    def services(self, obj: Obj) -> list[dict[str, Any]]:
        name = str(obj["metadata"]["name"])
        head = ((obj.get("spec") or {}).get("headGroupSpec") or {}).get("template") or {}
        containers = (head.get("spec") or {}).get("containers") or [{}]
        declared = {
            str(p.get("name")): int(p["containerPort"])
            for p in containers[0].get("ports") or []
            if p.get("name") and p.get("containerPort")
        }
        ports = declared or dict(DEFAULT_PORTS)
        ports.setdefault("metrics", DEFAULT_PORTS["metrics"])
        return [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": f"{name}-head-svc",
                    "labels": {CLUSTER_LABEL: name, NODE_TYPE_LABEL: "head"},
                },
                "spec": {
                    "clusterIP": "None",
                    "selector": {
                        CLUSTER_LABEL: name,
                        NODE_TYPE_LABEL: "head",
                        "ray.io/identifier": f"{name}-head",
                    },
                    "ports": [
                        {"name": port_name, "port": port, "targetPort": port}
                        for port_name, port in ports.items()
                    ],
                },
            }
        ]

    def status(self, obj: Obj, pods: list[Obj], services: list[Obj]) -> dict[str, Any]:
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        heads = [p for p in live if _label(p, NODE_TYPE_LABEL) == "head"]
        workers = [p for p in live if _label(p, NODE_TYPE_LABEL) == "worker"]
        groups = (obj.get("spec") or {}).get("workerGroupSpecs") or []
        desired = sum(
            min(
                max(int(g.get("replicas") or 0), int(g.get("minReplicas") or 0)),
                int(g.get("maxReplicas") or 0),
            )
            for g in groups
        )
        ready_workers = [p for p in workers if is_pod_ready(p)]
        all_ready = len(heads) == 1 and is_pod_ready(heads[0]) and len(ready_workers) == desired
        status: dict[str, Any] = {
            "desiredWorkerReplicas": desired,
            "readyWorkerReplicas": len(ready_workers),
            "availableWorkerReplicas": len(ready_workers),
            "minWorkerReplicas": sum(int(g.get("minReplicas") or 0) for g in groups),
            "maxWorkerReplicas": sum(int(g.get("maxReplicas") or 0) for g in groups),
            "observedGeneration": int(obj["metadata"].get("generation") or 1),
        }
        if all_ready:
            status["state"] = "ready"
        if heads:
            pod_ip = str((heads[0].get("status") or {}).get("podIP") or "")
            status["head"] = {
                "podName": heads[0]["metadata"]["name"],
                "podIP": pod_ip,
                "serviceName": f"{obj['metadata']['name']}-head-svc",
                "serviceIP": pod_ip,  # a headless Service: the head pod's own address
            }
        return status


def _label(pod: Obj, key: str) -> str:
    return str((pod["metadata"].get("labels") or {}).get(key) or "")


def _worker_name(cluster: str, group: str) -> Any:
    prefix = f"{cluster}-{group}-worker-"[:50].lower()
    return lambda: f"{prefix}{random_suffix()}"

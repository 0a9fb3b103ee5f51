"""The Kubeflow Spark operator, for ``SparkConnect`` (``sparkoperator.k8s.io/v1alpha1``).

A SparkConnect N is a long-running Spark cluster: the operator creates the server pod
``N-server`` (container ``spark-kubernetes-driver``; labels
``sparkoperator.k8s.io/launched-by-spark-operator=true``,
``sparkoperator.k8s.io/connect-name=N``, ``spark-role=connect-server``) and the Service
``N-server`` (ports 7078, 7079, 4040 and 15002); Spark itself then starts
``spec.executor.instances`` executors ``N-exec-<n>`` (``spark-role=executor``). The status
says ``Ready`` once the server pod is, where the server is, and executors by phase.

Here the simulation also starts the executors, which a real server does through the
Kubernetes API with its own service account.
"""

from __future__ import annotations

from typing import Any

from ..cache import Obj
from ..podstatus import is_pod_ready
from .base import Member, OperatorSimulation, member_keys

LAUNCHED_LABEL = "sparkoperator.k8s.io/launched-by-spark-operator"
CONNECT_LABEL = "sparkoperator.k8s.io/connect-name"
ROLE_LABEL = "spark-role"
SERVER_PORTS = {
    "driver-rpc": 7078,
    "blockmanager": 7079,
    "web-ui": 4040,
    "spark-connect-server": 15002,
}


class SparkConnectOperator(OperatorSimulation):
    plural = "sparkconnects"
    group = "sparkoperator.k8s.io"
    version = "v1alpha1"
    kind = "SparkConnect"
    owner_label = CONNECT_LABEL

    def cluster_selector(self, obj: Obj) -> dict[str, str]:
        return {CONNECT_LABEL: str(obj["metadata"]["name"]), LAUNCHED_LABEL: "true"}

    def members(self, obj: Obj, current: list[Obj]) -> list[Member]:
        name = str(obj["metadata"]["name"])
        spec = obj.get("spec") or {}
        version = str(spec.get("sparkVersion") or "")
        server = spec.get("server") or {}
        executor = spec.get("executor") or {}
        members = [
            Member(
                key="server",
                name=lambda: f"{name}-server",
                labels={
                    **_template_labels(server),
                    LAUNCHED_LABEL: "true",
                    CONNECT_LABEL: name,
                    ROLE_LABEL: "connect-server",
                    "sparkoperator.k8s.io/spark-version": version,
                },
                spec=_pod_spec(server, spec.get("image"), "spark-kubernetes-driver"),
            )
        ]
        taken = sorted(
            int(k.split(":", 1)[1]) for k in member_keys(current) if k.startswith("exec:")
        )
        wanted = max(0, int(executor.get("instances") or 0))
        indices = taken[:wanted]
        next_index = max(taken, default=0) + 1
        while len(indices) < wanted:
            indices.append(next_index)
            next_index += 1
        for index in indices:
            members.append(
                Member(
                    key=f"exec:{index}",
                    name=_fixed(f"{name}-exec-{index}"),
                    labels={
                        **_template_labels(executor),
                        LAUNCHED_LABEL: "true",
                        CONNECT_LABEL: name,
                        ROLE_LABEL: "executor",
                    },
                    spec=_pod_spec(executor, spec.get("image"), "spark-kubernetes-executor"),
                )
            )
        return members

    def services(self, obj: Obj) -> list[dict[str, Any]]:
        name = str(obj["metadata"]["name"])
        given = ((obj.get("spec") or {}).get("server") or {}).get("service") or {}
        service_name = str((given.get("metadata") or {}).get("name") or f"{name}-server")
        spec = dict(given.get("spec") or {})
        spec.setdefault("selector", {CONNECT_LABEL: name, ROLE_LABEL: "connect-server"})
        spec.setdefault(
            "ports",
            [{"name": n, "port": p, "targetPort": p} for n, p in SERVER_PORTS.items()],
        )
        labels = {CONNECT_LABEL: name, LAUNCHED_LABEL: "true"}
        return [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": service_name, "labels": labels},
                "spec": spec,
            }
        ]

    def status(self, obj: Obj, pods: list[Obj], services: list[Obj]) -> dict[str, Any]:
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        servers = [
            p
            for p in live
            if (p["metadata"].get("labels") or {}).get(ROLE_LABEL) == "connect-server"
        ]
        executors: dict[str, int] = {}
        for pod in live:
            if (pod["metadata"].get("labels") or {}).get(ROLE_LABEL) == "executor":
                phase = str((pod.get("status") or {}).get("phase") or "Pending").lower()
                executors[phase] = executors.get(phase, 0) + 1
        status: dict[str, Any] = {
            "state": "Ready" if servers and is_pod_ready(servers[0]) else "NotReady",
            "executors": executors,
        }
        if servers:
            status["server"] = {
                "podName": servers[0]["metadata"]["name"],
                "podIp": str((servers[0].get("status") or {}).get("podIP") or ""),
                "serviceName": services[0]["metadata"]["name"] if services else "",
            }
        return status


def _template_labels(part: dict[str, Any]) -> dict[str, str]:
    return dict(((part.get("template") or {}).get("metadata") or {}).get("labels") or {})


def _pod_spec(part: dict[str, Any], image: Any, container_name: str) -> dict[str, Any]:
    spec = dict((part.get("template") or {}).get("spec") or {})
    containers = [dict(c) for c in spec.get("containers") or [{}]]
    containers[0].setdefault("name", container_name)
    if image:
        containers[0].setdefault("image", str(image))
    spec["containers"] = containers
    return spec


def _fixed(name: str) -> Any:
    return lambda: name

"""KubeRay, for ``RayCluster`` (``ray.io/v1``).

KubeRay creates bare pods: the head ``N-head-<suffix>`` and, per worker group, replicas
``N-<group>-worker-<suffix>`` (clamped to the group's minimum and maximum), all labelled
``ray.io/cluster=N``, ``ray.io/node-type=head|worker``, ``ray.io/group`` (``headgroup`` for the
head), ``ray.io/is-ray-node=yes`` and ``ray.io/identifier``; and the headless Service
``N-head-svc`` selecting the head. Each pod's Ray container runs ``ray start`` as KubeRay builds
it (``raystart``). Its status says ``state: ready`` once every pod is running and ready, with
the worker counts and where the head is.

Where the Ray image runs as processes (the local stack's real labs), Ray's nodes are real, and
the simulation does what the local stack's network asks of them:

- the head Service has a cluster IP (as KubeRay makes it with
  ``ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE``): Ray's servers are C++ and resolve names without the
  stack's cluster DNS (a Python start-up hook), and a headless Service's name has no address,
  so workers are told the head's address as that IP;
- each node is told its own address (``node-ip-address``): Ray would take the machine's;
- Ray binds its GCS on every interface of the machine and its client server on the machine's
  127.0.0.1 too, whatever address it is given, so fixed ports would let one Ray cluster per
  machine run: each head gets free ports for them, declared as its container's ``gcs-server``
  and ``client`` ports, which the head Service's ports (6379, 10001) target by name;
- the head is ready once its client server listens (a TCP probe of its ``client`` port):
  KubeRay's own probes run commands (``wget`` against the dashboard agent's health routes),
  which the local stack does not run, and whose server Ray starts only with its full
  dashboard;
- nodes are small (``LOCAL_PARAMS``) and stop at once when their pod does (``LOCAL_ENV``).
"""

from __future__ import annotations

import copy
import socket
from typing import Any

from ..cache import Obj
from ..daemonsets import random_suffix
from ..podstatus import is_pod_ready
from ..programs import program_for
from .base import Member, OperatorSimulation, member_keys
from .raystart import (
    HEAD,
    WORKER,
    complete_params,
    head_port,
    ray_container,
    ray_env,
    start_command,
)

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
LOCAL_PARAMS = {
    "node-ip-address": "$(POD_IP)",
    "num-cpus": "1",
    "object-store-memory": str(80 * 2**20),
    "disable-usage-stats": "true",
}
"""What every process-run node gets unless its group's ``rayStartParams`` say otherwise: its
own address, one CPU whatever the pod's limit (the machine's cores are every pod's), a small
object store, and no usage reports. The head also gets ``include-dashboard=false``."""
LOCAL_ENV = {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0", "GRPC_ENABLE_FORK_SUPPORT": "false"}
"""The runtime stops all of a pod's processes at once, so a node has nothing left to drain.
And the head's Ray client server forks a server per client from a process busy with gRPC
threads, whose fork handlers now and then kill that child before it runs (the client then
fails with "Starting Ray client server failed"); the child runs a new program at once, which
needs none of them."""
LOCAL_HEAD_PROBE = {"tcpSocket": {"port": "client"}, "periodSeconds": 1}
"""When a process-run head is ready: once its client server, the last of its servers to
open, listens."""
LOCAL_PORTS = {"gcs-server": "port", "client": "ray-client-server-port"}
"""The head's container ports given free numbers where it runs as processes, and the
``ray start`` flags that bind them."""


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
        head_group = spec.get("headGroupSpec") or {}
        head = head_group.get("template") or {}
        members = [
            Member(
                key="head",
                name=lambda: f"{name}-head-{random_suffix()}",
                labels=self._labels(obj, head, "head", "headgroup"),
                spec=self._pod_spec(obj, head_group, HEAD),
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
                        spec=self._pod_spec(obj, group, WORKER),
                    )
                )
        return members

    def _pod_spec(self, obj: Obj, group: dict[str, Any], node_type: str) -> dict[str, Any]:
        """The group's pod spec with its Ray container running ``ray start`` (``raystart``)."""
        spec = copy.deepcopy((group.get("template") or {}).get("spec") or {})
        containers = spec.get("containers") or []
        if not containers:
            return spec
        ray, local = containers[0], self._runs_as_processes(containers[0])
        params = dict(group.get("rayStartParams") or {})
        head_params = ((obj.get("spec") or {}).get("headGroupSpec") or {}).get("rayStartParams")
        port = head_port(head_params or {})
        host = self._head_host(obj)
        # RAY_ADDRESS, as KubeRay sets it: the head's own GCS on localhost, else the head's.
        address = f"127.0.0.1:{port}" if node_type == HEAD else f"{host}:{port}"
        if local:
            params = {**LOCAL_PARAMS, **params}
            if node_type == HEAD:
                params.setdefault("include-dashboard", "false")
                ray = _with_free_ports(ray, params)
                ray.setdefault("readinessProbe", LOCAL_HEAD_PROBE)
                # The machine's localhost is no pod's own: the GCS is at the pod's address.
                address = f"$(POD_IP):{params['port']}"
        params = complete_params(node_type, params, ray.get("resources") or {}, f"{host}:{port}")
        command = start_command(node_type, params)
        env = ray_env(node_type, command, address, port, host)
        if local:
            env.update({k: {"value": v} for k, v in LOCAL_ENV.items()})
        containers[0] = ray_container(ray, command, env)
        return spec

    def _runs_as_processes(self, container: dict[str, Any]) -> bool:
        return program_for(self._settings.programs, str(container.get("image") or "")) is not None

    def _head_host(self, obj: Obj) -> str:
        """Where workers find the head: its Service's loopback cluster IP where it has one
        (Ray's C++ servers do not read the stack's cluster DNS), its DNS name otherwise."""
        meta = obj["metadata"]
        namespace, service_name = meta.get("namespace"), f"{meta['name']}-head-svc"
        service = self._writer.store.get("services", namespace, service_name)
        address = str(((service or {}).get("spec") or {}).get("clusterIP") or "")
        if address.startswith("127."):
            return address
        return f"{service_name}.{namespace}.svc.cluster.local"

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
        local = self._runs_as_processes(containers[0])
        spec: dict[str, Any] = {
            "selector": {
                CLUSTER_LABEL: name,
                NODE_TYPE_LABEL: "head",
                "ray.io/identifier": f"{name}-head",
            },
            "ports": [
                {
                    "name": port_name,
                    "port": port,
                    # Each process-run head has ports of its own (LOCAL_PORTS): by name.
                    "targetPort": port_name if local and port_name in LOCAL_PORTS else port,
                }
                for port_name, port in ports.items()
            ],
        }
        if not local:
            spec["clusterIP"] = "None"
        return [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": f"{name}-head-svc",
                    "labels": {CLUSTER_LABEL: name, NODE_TYPE_LABEL: "head"},
                },
                "spec": spec,
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
            service_name = f"{obj['metadata']['name']}-head-svc"
            cluster_ips = [
                str((s.get("spec") or {}).get("clusterIP") or "")
                for s in services
                if s["metadata"]["name"] == service_name
            ]
            service_ip = next((ip for ip in cluster_ips if ip not in ("", "None")), pod_ip)
            status["head"] = {
                "podName": heads[0]["metadata"]["name"],
                "podIP": pod_ip,
                "serviceName": service_name,
                # A headless Service's address is the head pod's own.
                "serviceIP": service_ip,
            }
        return status


def _label(pod: Obj, key: str) -> str:
    return str((pod["metadata"].get("labels") or {}).get(key) or "")


def _with_free_ports(container: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The head's Ray container with a free port for each of ``LOCAL_PORTS`` its params do not
    set, in ``params`` and as the container's port of that name."""
    ports = [dict(p) for p in container.get("ports") or []]
    for port_name, flag in LOCAL_PORTS.items():
        if flag in params:
            continue
        params[flag] = str(_free_port())
        ports = [p for p in ports if p.get("name") != port_name]
        ports.append({"name": port_name, "containerPort": int(params[flag]), "protocol": "TCP"})
    return {**container, "ports": ports}


def _free_port() -> int:
    """A port no socket of the machine holds now, on any address (as Ray itself picks one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def _worker_name(cluster: str, group: str) -> Any:
    prefix = f"{cluster}-{group}-worker-"[:50].lower()
    return lambda: f"{prefix}{random_suffix()}"

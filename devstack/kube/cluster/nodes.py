"""Node objects as a kubelet registers them, and the facts about a node other components read."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from .cache import Obj
from .clock import now_rfc3339

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

DEFAULT_CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
DEFAULT_ALLOCATABLE = {"cpu": "7800m", "memory": "31Gi", "pods": "110", "ephemeral-storage": "95Gi"}


def build_node(
    name: str,
    index: int,
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    images: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> Obj:
    """A Node as a kubelet registers it, complete enough for the strict client models.

    A node that is not ready carries the ``not-ready`` taint, as the node lifecycle
    controller adds it, which is what keeps ordinary pods off it.
    """
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        **(labels or {}),
    }
    spec_taints = [dict(t) for t in taints or []]
    if not ready:
        spec_taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
    spec: dict[str, Any] = {"podCIDR": pod_cidr(index), "podCIDRs": [pod_cidr(index)]}
    if spec_taints:
        spec["taints"] = spec_taints
    if unschedulable:
        spec["unschedulable"] = True
    now = now_rfc3339()
    machine = hashlib.sha256(name.encode()).hexdigest()[:32]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": all_labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": {
            "capacity": dict(DEFAULT_CAPACITY),
            "allocatable": dict(DEFAULT_ALLOCATABLE),
            "conditions": node_conditions(ready, now),
            "addresses": [
                {"type": "InternalIP", "address": node_ip(index)},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": machine,
                "systemUUID": str(uuid.UUID(machine)),
                "bootID": str(uuid.uuid4()),
                "kernelVersion": "6.1.0-emulated",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": "v1.33.0",
                "kubeProxyVersion": "v1.33.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": images or [],
        },
    }


def node_conditions(ready: bool, now: str) -> list[dict[str, Any]]:
    """The conditions a healthy kubelet reports, with Ready as requested."""

    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    return [
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        condition(
            "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")
        if ready
        else condition("Ready", "False", "KubeletNotReady", "container runtime network not ready"),
    ]


def set_ready(node: Obj, ready: bool) -> bool:
    """Flip the Ready condition and the matching taint; True if anything changed."""
    now = now_rfc3339()
    status = node.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
    conditions.extend(c for c in node_conditions(ready, now) if c["type"] == "Ready")
    changed = is_ready(node) != ready
    status["conditions"] = conditions
    spec = node.setdefault("spec", {})
    taints = [t for t in spec.get("taints") or [] if t.get("key") != NOT_READY_TAINT]
    if not ready:
        taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)
    return changed


def pod_cidr(index: int) -> str:
    """A /24 per node from 10.244.0.0/14, valid for the first thousand nodes and more."""
    return f"10.{244 + index // 256}.{index % 256}.0/24"


def node_ip(index: int) -> str:
    """A valid address however many nodes there are (a population has hundreds)."""
    return f"10.0.{index // 240}.{index % 240 + 10}"


def node_name(node: Obj) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def internal_ip(node: Obj) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    return ""


def is_ready(node: Obj) -> bool:
    """A node is ready only when its kubelet says so; no Ready condition means not ready."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def is_cordoned(node: Obj) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def taints(node: Obj) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def labels(node: Obj) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("labels") or {})


def allocatable(node: Obj) -> dict[str, Any]:
    return dict((node.get("status") or {}).get("allocatable") or {})


def placement_view(node: Obj) -> tuple[object, ...]:
    """The facts about a node that decide where pods go and whether they run.

    Kubelets rewrite ``status.images`` after every pull; reacting to each of those by
    re-examining every pod would make pulls quadratic, so only changes to this view count.
    """
    return (labels(node), taints(node), is_cordoned(node), is_ready(node), allocatable(node))

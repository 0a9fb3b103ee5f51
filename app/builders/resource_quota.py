"""The ResourceQuota that bounds a lab namespace.

The quota is exactly what the namespace should hold: the lab's size, plus what the user's
compute clusters there request and may use (raised before a cluster's pods are made, lowered
when they go; see ``app.workloads.cluster.quota``). Nothing else fits. Because a quota on CPU
and memory makes Kubernetes reject any container without requests and limits, init containers
get the lab's resources too (see ``pod``), and every cluster pod has a hardware tier's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.builders import names
from app.builders.metadata import lab_object
from app.models.config import LabSize
from app.models.lab import LabSpec
from app.models.sizes import PodSize
from app.quantities import format_cpu, format_memory

GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource a pod asks GPUs with (NVIDIA's device plugin)."""


def quotas(size: LabSize) -> dict[str, dict[str, float | int]]:
    """The lab status ``quotas`` field (DMTN-222): cores as floats and memory in bytes."""
    return {
        "limits": {"cpu": size.cpu, "memory": size.memory},
        "requests": {"cpu": size.cpu_request, "memory": size.memory_request},
    }


def container_resources(size: LabSize) -> dict[str, dict[str, str]]:
    """A container's ``resources`` for a size, as the quantity strings Kubernetes prints."""
    return {
        "limits": {"cpu": format_cpu(size.cpu), "memory": format_memory(size.memory)},
        "requests": {
            "cpu": format_cpu(size.cpu_request),
            "memory": format_memory(size.memory_request),
        },
    }


@dataclass(frozen=True)
class Compute:
    """CPU and memory that pods request and may use (their limits), summed."""

    cpu_request: float = 0.0
    memory_request: int = 0
    cpu_limit: float = 0.0
    memory_limit: int = 0

    def __add__(self, other: Compute) -> Compute:
        return Compute(
            self.cpu_request + other.cpu_request,
            self.memory_request + other.memory_request,
            self.cpu_limit + other.cpu_limit,
            self.memory_limit + other.memory_limit,
        )

    def times(self, count: int) -> Compute:
        return Compute(
            self.cpu_request * count,
            self.memory_request * count,
            self.cpu_limit * count,
            self.memory_limit * count,
        )

    @classmethod
    def of_quotas(cls, quotas: dict[str, dict[str, float | int]]) -> Compute:
        """A lab's, from its status ``quotas`` field (see ``quotas``)."""
        limits, requests = quotas["limits"], quotas["requests"]
        return cls(
            float(requests["cpu"]),
            int(requests["memory"]),
            float(limits["cpu"]),
            int(limits["memory"]),
        )


def size_compute(size: LabSize) -> Compute:
    return Compute(size.cpu_request, size.memory_request, size.cpu, size.memory)


def build_resource_quota(spec: LabSpec, namespace: str) -> dict[str, Any]:
    """ResourceQuota ``nb-<user>-quota`` of a new lab: exactly the lab's size."""
    return build_namespace_quota(spec.username, namespace, size_compute(spec.size))


def build_namespace_quota(username: str, namespace: str, compute: Compute) -> dict[str, Any]:
    """ResourceQuota ``nb-<user>-quota``: the namespace may hold exactly ``compute``."""
    return {
        **lab_object("ResourceQuota", username, names.QUOTA_SUFFIX, namespace=namespace),
        "spec": {
            "hard": {
                "limits.cpu": format_cpu(compute.cpu_limit),
                "limits.memory": format_memory(compute.memory_limit),
                "requests.cpu": format_cpu(compute.cpu_request),
                "requests.memory": format_memory(compute.memory_request),
            }
        },
    }


def pod_compute(size: PodSize) -> Compute:
    """What the pod counts against its namespace's quota."""
    return Compute(size.cpu_request, size.memory_request, size.cpu_limit, size.memory_limit)


def pod_resources(size: PodSize) -> dict[str, Any]:
    """The container's ``resources``."""
    requests = {"cpu": format_cpu(size.cpu_request), "memory": format_memory(size.memory_request)}
    limits = {"cpu": format_cpu(size.cpu_limit), "memory": format_memory(size.memory_limit)}
    if size.gpus:
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = str(size.gpus)
    return {"limits": limits, "requests": requests}

"""The ResourceQuota that bounds a lab namespace.

The quota is exactly the lab's size, so the lab pod fits and nothing else does; Dask pools will
raise it when they are added. Because a quota on CPU and memory makes Kubernetes reject any
container without requests and limits, init containers get the lab's resources too (see ``pod``).
"""

from __future__ import annotations

from typing import Any

from app.builders import names
from app.builders.metadata import object_meta
from app.config.models import LabSize
from app.models.lab import LabSpec
from app.quantities import format_cpu, format_memory


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


def build_resource_quota(spec: LabSpec, namespace: str) -> dict[str, Any]:
    """ResourceQuota ``nb-<user>-quota``: the namespace may hold exactly the lab's size."""
    resources = container_resources(spec.size)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_meta(
            names.object_name(spec.username, names.QUOTA_SUFFIX),
            spec.username,
            namespace=namespace,
        ),
        "spec": {
            "hard": {
                "limits.cpu": resources["limits"]["cpu"],
                "limits.memory": resources["limits"]["memory"],
                "requests.cpu": resources["requests"]["cpu"],
                "requests.memory": resources["requests"]["memory"],
            }
        },
    }

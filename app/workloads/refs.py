"""The engine's names of the kinds besides labs, and their workloads' references.

A cluster or a kernel is named ``owner/name`` within its kind, so one prefix finds all of a
user's (``app.workloads.holdings``).
"""

from __future__ import annotations

from app.models.workload import WorkloadRef

CLUSTER_KIND = "cluster"
KERNEL_KIND = "kernel"
APP_KIND = "app"
IMAGE_KIND = "image"


def cluster_ref(owner: str, name: str) -> WorkloadRef:
    """A cluster's workload reference: its owner and name, as ``owner/name``."""
    return WorkloadRef(CLUSTER_KIND, f"{owner}/{name}")


def kernel_ref(owner: str, kernel_id: str) -> WorkloadRef:
    """A kernel's workload reference: ``owner/kernel_id``."""
    return WorkloadRef(KERNEL_KIND, f"{owner}/{kernel_id}")


def app_ref(app_id: str) -> WorkloadRef:
    """An app's workload reference: its id, unique across groups (its URL holds it)."""
    return WorkloadRef(APP_KIND, app_id)


def image_ref(digest: str) -> WorkloadRef:
    """An image's workload reference: its digest."""
    return WorkloadRef(IMAGE_KIND, digest)

"""The engine's names of the kinds that live beside a lab, and their workloads' references.

A cluster or a kernel is named ``owner/name`` within its kind, so one prefix finds all of a
user's (``app.workloads.holdings``).
"""

from __future__ import annotations

from app.engine.workload import WorkloadRef

CLUSTER_KIND = "cluster"
KERNEL_KIND = "kernel"


def cluster_ref(owner: str, name: str) -> WorkloadRef:
    """A cluster's workload reference: its owner and name, as ``owner/name``."""
    return WorkloadRef(CLUSTER_KIND, f"{owner}/{name}")


def kernel_ref(owner: str, kernel_id: str) -> WorkloadRef:
    """A kernel's workload reference: ``owner/kernel_id``."""
    return WorkloadRef(KERNEL_KIND, f"{owner}/{kernel_id}")

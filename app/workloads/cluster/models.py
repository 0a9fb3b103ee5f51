"""A compute cluster as the service records it (the routes' body, stored in Redis as JSON
through its schema, ``app.workloads.cluster.schemas.ClusterSchema``)."""

from __future__ import annotations

from dataclasses import dataclass

from app.models.usage import BudgetedRecord
from app.models.workload import WorkloadStatus


@dataclass(frozen=True)
class ClusterRecord(BudgetedRecord):
    """What the service knows of one cluster: what was asked, where it runs, how it is."""

    kind: str
    """The kind's name in routes (``daskclusters``)."""
    name: str
    namespace: str
    owner: str
    status: WorkloadStatus
    workers: int
    max_workers: int
    worker_tier: str
    head_tier: str
    image: str
    scheduler_address: str | None = None
    dashboard_url: str | None = None

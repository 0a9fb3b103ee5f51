"""A compute cluster as the service records it (the routes' body, stored in Redis as JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.models.workload import WorkloadStatus, parse_record, record_json


@dataclass(frozen=True)
class ClusterRecord:
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
    usage: dict[str, float] = field(default_factory=dict)
    """What it holds against its owner's budget (``app.models.usage.Usage``'s fields)."""
    scheduler_address: str | None = None
    dashboard_url: str | None = None
    error: str | None = None


def cluster_json(record: ClusterRecord) -> str:
    return record_json(record)


def parse_cluster(raw: str) -> ClusterRecord:
    return parse_record(ClusterRecord, raw)

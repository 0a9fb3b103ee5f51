"""A compute cluster as the service records it (the routes' body, stored in Redis as JSON)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class ClusterStatus(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    FAILED = "failed"
    TERMINATING = "terminating"


@dataclass(frozen=True)
class ClusterRecord:
    """What the service knows of one cluster: what was asked, where it runs, how it is."""

    kind: str
    """The kind's name in routes (``daskclusters``)."""
    name: str
    namespace: str
    owner: str
    status: ClusterStatus
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
    data = asdict(record)
    data["status"] = record.status.value
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def parse_cluster(raw: str) -> ClusterRecord:
    data: dict[str, Any] = json.loads(raw)
    data["status"] = ClusterStatus(data["status"])
    return ClusterRecord(**data)

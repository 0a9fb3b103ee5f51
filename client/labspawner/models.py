"""Typed views of the service's answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STARTING = "starting"
RUNNING = "running"
TERMINATING = "terminating"
FAILED = "failed"


@dataclass(frozen=True)
class LabStatus:
    """A lab's status, as ``GET /spawner/v1/labs/<user>`` and ``/user-status`` answer it."""

    username: str
    status: str
    pod: str
    options: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    uid: int | None = None
    gid: int | None = None
    groups: list[dict[str, Any]] = field(default_factory=list)
    quotas: dict[str, Any] = field(default_factory=dict)
    internal_url: str | None = None
    error: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LabStatus:
        return cls(
            username=data["username"],
            status=data["status"],
            pod=data.get("pod", "missing"),
            options=dict(data.get("options") or {}),
            env=dict(data.get("env") or {}),
            uid=data.get("uid"),
            gid=data.get("gid"),
            groups=list(data.get("groups") or []),
            quotas=dict(data.get("quotas") or {}),
            internal_url=data.get("internal_url"),
            error=data.get("error"),
        )

    @property
    def running(self) -> bool:
        return self.status == RUNNING

    @property
    def failed(self) -> bool:
        return self.status == FAILED

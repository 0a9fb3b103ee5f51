"""A user's file server as the service keeps it, and who it runs as.

One file server per user, named by the user in the engine. The record says where it
stands; its objects say the rest (its Job holds the identity it runs as), so a record
Redis lost is made again from the Job alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.models.identity import UserInfo
from app.models.workload import WorkloadRef, WorkloadStatus

FILESERVER_KIND = "fileserver"
"""The kind's name in workload references, Redis keys and event subjects."""


def fileserver_ref(username: str) -> WorkloadRef:
    """A user's file server's workload reference: the user's name."""
    return WorkloadRef(FILESERVER_KIND, username)


@dataclass(frozen=True)
class FileserverRecord:
    """``status`` is ``starting`` until the server answers, ``running`` while it does,
    ``failed`` (``message`` says why) when it could not come up, and ``terminating`` once
    its deletion is queued (by a user, an administrator, or because it stopped by itself)."""

    username: str
    created: str
    status: WorkloadStatus = WorkloadStatus.STARTING
    message: str = ""

    def with_status(self, status: WorkloadStatus, message: str = "") -> FileserverRecord:
        return replace(self, status=status, message=message)


@dataclass(frozen=True)
class RunAs:
    """The identity a file server runs as: the user's, so that the file systems' own
    permissions decide what it may read and write."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    """Supplemental group IDs."""

    @classmethod
    def of(cls, user: UserInfo) -> RunAs | None:
        """The user's identity; None for a user Gafaelfawr gives no UID or GID."""
        if user.uid is None or user.gid is None:
            return None
        groups = sorted({g.id for g in user.groups if g.id is not None and g.id != user.gid})
        return cls(uid=user.uid, gid=user.gid, groups=tuple(groups))

    def to_spec(self) -> dict[str, object]:
        return {"uid": self.uid, "gid": self.gid, "groups": list(self.groups)}

    @classmethod
    def from_spec(cls, spec: dict[str, object]) -> RunAs:
        groups = spec.get("groups") or []
        assert isinstance(groups, list)
        return cls(uid=int(str(spec["uid"])), gid=int(str(spec["gid"])), groups=tuple(groups))

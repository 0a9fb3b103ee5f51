"""Typed views of the service's answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STARTING = "starting"
RUNNING = "running"
TERMINATING = "terminating"
FAILED = "failed"
EXITED = "exited"


class _Phase:
    """``running`` and ``failed`` of anything with a ``status``, lab or cluster."""

    status: str

    @property
    def running(self) -> bool:
        return self.status == RUNNING

    @property
    def failed(self) -> bool:
        return self.status == FAILED


@dataclass(frozen=True)
class LabStatus(_Phase):
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
    api: str = "dmtn-222"
    """The API that created the lab (``dmtn-222`` or ``nublado``)."""

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
            api=data.get("api") or "dmtn-222",
        )


@dataclass(frozen=True)
class Cluster(_Phase):
    """A compute cluster, as ``GET /spawner/v1/labs/<user>/clusters/<name>`` answers it."""

    kind: str
    name: str
    namespace: str
    owner: str
    status: str
    workers: int
    max_workers: int
    worker_tier: str
    head_tier: str
    image: str
    usage: dict[str, Any] = field(default_factory=dict)
    scheduler_address: str | None = None
    """Where a client reaches it (``tcp://`` for Dask), once it runs."""
    dashboard_url: str | None = None
    error: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cluster:
        return cls(
            kind=data["kind"],
            name=data["name"],
            namespace=data["namespace"],
            owner=data["owner"],
            status=data["status"],
            workers=int(data["workers"]),
            max_workers=int(data["max_workers"]),
            worker_tier=data["worker_tier"],
            head_tier=data["head_tier"],
            image=data["image"],
            usage=dict(data.get("usage") or {}),
            scheduler_address=data.get("scheduler_address"),
            dashboard_url=data.get("dashboard_url"),
            error=data.get("error"),
        )


@dataclass(frozen=True)
class Kernel(_Phase):
    """A remote kernel, as ``GET /spawner/v1/labs/<user>/kernels/<kernel_id>`` answers it.

    The connection key is never part of it: only the caller that chose the key holds it.
    """

    kernel_id: str
    owner: str
    namespace: str
    status: str
    """``starting``, ``running``, ``exited``, ``failed`` or ``terminating``."""
    size: str
    image: str
    created: str
    usage: dict[str, Any] = field(default_factory=dict)
    """What it holds against its owner's budget."""
    ip: str | None = None
    """The kernel pod's address, once it runs."""
    ports: dict[str, int] = field(default_factory=dict)
    """``shell``, ``iopub``, ``stdin``, ``control`` and ``hb``, on ``ip``."""
    exit_code: int | None = None
    error: str | None = None
    """Why it failed (an image that cannot be pulled, no room, a crash)."""

    @property
    def exited(self) -> bool:
        return self.status == EXITED

    @property
    def terminating(self) -> bool:
        return self.status == TERMINATING

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Kernel:
        exit_code = data.get("exit_code")
        return cls(
            kernel_id=data["kernel_id"],
            owner=data["owner"],
            namespace=data["namespace"],
            status=data["status"],
            size=data["size"],
            image=data["image"],
            created=data["created"],
            usage=dict(data.get("usage") or {}),
            ip=data.get("ip"),
            ports={str(name): int(port) for name, port in (data.get("ports") or {}).items()},
            exit_code=None if exit_code is None else int(exit_code),
            error=data.get("error"),
        )


@dataclass(frozen=True)
class App:
    """A group's app, as ``GET /spawner/v1/apps/<id>`` answers it."""

    id: str
    group: str
    template: str
    template_version: str
    name: str
    scope: str
    size: str
    env: dict[str, str]
    stopped: bool
    phase: str
    """``Starting``, ``Ready``, ``Updating``, ``Stopping``, ``Stopped`` or ``Error``."""
    message: str
    url: str
    created: str
    creator: str
    status: str

    @property
    def ready(self) -> bool:
        return self.phase == "Ready"

    @property
    def failed(self) -> bool:
        return self.phase == "Error"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> App:
        return cls(
            id=data["id"],
            group=data["group"],
            template=data["template"],
            template_version=data["template_version"],
            name=data["name"],
            scope=data["scope"],
            size=data["size"],
            env=dict(data.get("env") or {}),
            stopped=bool(data["stopped"]),
            phase=data["phase"],
            message=data.get("message") or "",
            url=data["url"],
            created=data["created"],
            creator=data["creator"],
            status=data["status"],
        )


@dataclass(frozen=True)
class FileServerMount:
    """One file system a file server serves, as the lab sees it."""

    name: str
    """The mount's URL segment (``home`` for the lab's ``/home``)."""
    path: str
    """Where the lab mounts it."""
    read_only: bool
    url: str
    """Where a WebDAV client mounts this file system alone."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileServerMount:
        return cls(
            name=data["name"],
            path=data["path"],
            read_only=bool(data["readOnly"]),
            url=data["url"],
        )


@dataclass(frozen=True)
class FileServer:
    """The caller's file server, as ``GET /files`` answers it in JSON.

    A WebDAV client mounts ``url`` (every mount as a folder) or one mount's ``url``, with
    ``username`` as the user name and a token with the file-server scope as the password.
    """

    username: str
    url: str
    running: bool
    mounts: list[FileServerMount] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileServer:
        return cls(
            username=data["username"],
            url=data["url"],
            running=bool(data["running"]),
            mounts=[FileServerMount.from_json(m) for m in data.get("mounts") or []],
        )


@dataclass(frozen=True)
class FileServerStatus:
    """The caller's file server, as ``GET /fileserver/v1/user-status`` answers: ``running``
    while it serves (false while it starts or stops), whose it is and where."""

    running: bool
    username: str
    url: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileServerStatus:
        return cls(running=bool(data["running"]), username=data["username"], url=data["url"])

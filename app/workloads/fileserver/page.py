"""What ``GET /files`` answers: where the user's file server is and how to mount it, as an
HTML page for a browser, or as JSON for a program."""

from __future__ import annotations

from dataclasses import dataclass

from jinja2 import Environment, PackageLoader, select_autoescape

from app.models.config import Config
from app.workloads.fileserver.builders import served_mounts, server_url
from app.workloads.fileserver.config import FileserverConfig, fileserver_config

_PAGES = Environment(
    loader=PackageLoader("app.workloads.fileserver"), autoescape=select_autoescape(["html"])
)


@dataclass(frozen=True)
class MountAccess:
    name: str
    path: str
    read_only: bool
    url: str


@dataclass(frozen=True)
class FileserverAccess:
    """The user's running file server: its URL, and each mount's."""

    username: str
    url: str
    mounts: tuple[MountAccess, ...]
    running: bool = True


def access(config: Config, username: str) -> FileserverAccess:
    """Where ``username``'s server and its mounts are."""
    url = server_url(fileserver_config(config), username)
    mounts = tuple(
        MountAccess(
            name=m["name"], path=m["path"], read_only=m["readOnly"], url=f"{url}{m['name']}/"
        )
        for m in served_mounts(config)
    )
    return FileserverAccess(username=username, url=url, mounts=mounts)


def render_page(config: FileserverConfig, access: FileserverAccess) -> str:
    return _PAGES.get_template("fileserver.html").render(
        access=access, scope=config.scope, idle=_duration(config.idle_timeout)
    )


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        hours = int(seconds // 3600)
        return f"{hours} hour{'s' if hours > 1 else ''}"
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes} minute{'s' if minutes > 1 else ''}"
    return f"{seconds:g} seconds"

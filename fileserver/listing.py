"""The collection at the URL prefix itself: the mounts, by name.

Each mount is a wsgidav share of its own at ``<prefix>/<name>``; this provider is the share at
``<prefix>``, so that a client mounting the prefix (as the user is told to) sees the mounts as
its folders. It creates, deletes, moves and locks nothing: a write at this level answers 403.
It still answers as a read-write share (DAV class 2 in OPTIONS), so that a client deciding from
the prefix whether the whole mount is writable (macOS Finder does) writes into the mounts.
"""

from __future__ import annotations

from typing import Any

from wsgidav.dav_error import HTTP_FORBIDDEN, DAVError
from wsgidav.dav_provider import DAVCollection, DAVProvider

from fileserver.config import Mount


class MountList(DAVProvider):
    """The provider of the prefix's own collection."""

    def __init__(self, mounts: tuple[Mount, ...]) -> None:
        super().__init__()
        self.mounts = {mount.name: mount for mount in mounts}

    def get_resource_inst(self, path: str | None, environ: dict[str, Any]) -> Any:
        """The listing at the prefix, and an entry for each mount as its member; a path below
        a mount's name never arrives here (wsgidav routes it to the mount's share). ``None``
        is what wsgidav asks for as the root's parent: there is none."""
        if path is None:
            return None
        name = path.strip("/")
        if not name:
            return Listing("/", environ, tuple(self.mounts))
        if name in self.mounts:
            return MountEntry(path, environ)
        return None


class _Fixed(DAVCollection):
    """A collection of this provider: nothing in it can be changed or locked."""

    def prevent_locking(self) -> bool:
        return True

    def handle_delete(self) -> bool:
        raise DAVError(HTTP_FORBIDDEN, "The list of mounts cannot be changed.")


class Listing(_Fixed):
    def __init__(self, path: str, environ: dict[str, Any], names: tuple[str, ...]) -> None:
        super().__init__(path, environ)
        self.names = names

    def get_member_names(self) -> list[str]:
        return list(self.names)


class MountEntry(_Fixed):
    """A mount as a member of the listing. Its own contents are served by its share, so a
    listing of infinite depth from the prefix stops here."""

    def get_member_names(self) -> list[str]:
        return []

"""One mount served over WebDAV: wsgidav's file-system provider, kept inside its directory.

wsgidav's ``FilesystemProvider`` either follows no symbolic link at all (its default) or
follows every one, out of the tree included. A user's home holds links, most of them inside
it, so the provider here follows a link only when the path, every link on the way resolved,
stays inside the mount's directory; anything else answers 403 and is left out of listings.
"Inside" is this mount, not any mount: a link from a read-write mount into a read-only one
would otherwise make the read-only files writable through it.

wsgidav's own ``follow_symlinks`` option stays off, so that the paths wsgidav maps by itself
(a new file's, a MOVE's or COPY's destination) are checked against the real directory too.
The process runs as the user, so a link swapped between that check and the file's use reaches
nothing the user's own identity cannot.
"""

from __future__ import annotations

import os
from typing import Any

from wsgidav.dav_error import HTTP_FORBIDDEN, DAVError
from wsgidav.fs_dav_provider import FileResource, FilesystemProvider, FolderResource

from fileserver.config import Mount

_OUTSIDE = "The path leads out of the mount through a symbolic link."


class MountProvider(FilesystemProvider):
    """The WebDAV provider of one mount, read-only where the mount is."""

    def __init__(self, mount: Mount) -> None:
        super().__init__(
            str(mount.path), readonly=mount.read_only, fs_opts={"follow_symlinks": False}
        )
        self.mount = mount

    def file_path(self, path: str) -> str:
        """The file a resource path names, below the mount's directory (wsgidav has already
        refused a path that climbs above the share's root)."""
        segments = [segment for segment in path.split("/") if segment]
        return os.path.abspath(os.path.join(self.root_folder_path, *segments))

    def holds(self, file_path: str) -> bool:
        """Whether ``file_path``, every symbolic link on the way resolved, is inside the
        mount's directory."""
        real = os.path.realpath(file_path)
        return os.path.commonpath([self.root_folder_path_real, real]) == (
            self.root_folder_path_real
        )

    def get_resource_inst(self, path: str | None, environ: dict[str, Any]) -> Any:
        """The file or folder at ``path``; ``None`` where there is none (or it is neither, a
        socket or a FIFO, say) and for ``None``, which wsgidav asks for as the parent of the
        share's root; 403 where the path leaves the mount."""
        if path is None:
            return None
        file_path = self.file_path(path)
        if not self.holds(file_path):
            raise DAVError(HTTP_FORBIDDEN, _OUTSIDE)
        if os.path.isdir(file_path):
            return MountFolder(path, environ, file_path, self)
        if os.path.isfile(file_path):
            return FileResource(path, environ, file_path)
        return None


class MountFolder(FolderResource):
    """A folder of a mount: its listing leaves out what the provider would refuse, and the
    mount's own directory cannot be deleted (a DELETE of it would empty the user's home)."""

    def __init__(
        self, path: str, environ: dict[str, Any], file_path: str, provider: MountProvider
    ) -> None:
        super().__init__(path, environ, file_path)
        self.directory = file_path
        self.mount_provider = provider

    def get_member_names(self) -> list[str]:
        names = []
        for name in sorted(os.listdir(self.directory)):
            member = os.path.join(self.directory, name)
            if self.mount_provider.holds(member) and (
                os.path.isdir(member) or os.path.isfile(member)
            ):
                names.append(name)
        return names

    def handle_delete(self) -> bool:
        if self.path in ("", "/"):
            raise DAVError(HTTP_FORBIDDEN, "A mount itself cannot be deleted.")
        return bool(super().handle_delete())

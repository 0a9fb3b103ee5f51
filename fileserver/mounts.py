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
import stat
import tempfile
from collections.abc import Iterable
from typing import IO, Any

from wsgidav.dav_error import HTTP_BAD_REQUEST, HTTP_FORBIDDEN, DAVError
from wsgidav.fs_dav_provider import FileResource, FilesystemProvider, FolderResource

from fileserver.config import Mount

_OUTSIDE = "The path leads out of the mount through a symbolic link."
_SHORT = "The body ended before the length its Content-Length announced."
UPLOAD = ".upload"
"""The suffix of the hidden file an upload is written to until it is complete."""


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
            return MountFile(path, environ, file_path)
        return None


class MountFile(FileResource):
    """A file of a mount, written whole or not at all.

    wsgidav writes a PUT's body straight into the file, so an upload cut off (a laptop that
    sleeps, a dropped connection) leaves the file truncated, its old content lost. Here the
    body goes to a hidden file beside it, which replaces the file (keeping its permissions)
    only once the body has arrived in full; otherwise it is removed and the file is as it
    was. A new file is the empty one wsgidav made before the body came.
    """

    _upload: _Upload | None = None

    def begin_write(self, *, content_type: str | None = None) -> _Upload:
        if self.provider.readonly:
            raise DAVError(HTTP_FORBIDDEN)
        directory, name = os.path.split(self._file_path)
        handle, path = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=UPLOAD)
        self._upload = _Upload(os.fdopen(handle, "wb"), path)
        return self._upload

    def end_write(self, *, with_errors: bool) -> None:
        """Replace the file with the upload when it is whole: no error, and (with a
        ``Content-Length``) every byte it announced; else 400, and the file as it was."""
        upload, self._upload = self._upload, None
        if upload is None:
            return
        expected = self.environ.get("CONTENT_LENGTH")
        short = bool(expected) and str(expected).isdigit() and int(expected) != upload.written
        if with_errors or short:
            upload.discard()
            if short:
                raise DAVError(HTTP_BAD_REQUEST, _SHORT)
            return
        upload.close()
        mode = stat.S_IMODE(os.stat(self._file_path).st_mode)
        os.chmod(upload.path, mode)
        os.replace(upload.path, self._file_path)
        self.file_stat = os.stat(self._file_path)


class _Upload:
    """The hidden file an upload is written to, counting what it was given."""

    def __init__(self, file: IO[bytes], path: str) -> None:
        self.file = file
        self.path = path
        self.written = 0

    def write(self, data: bytes) -> int:
        self.written += len(data)
        return self.file.write(data)

    def writelines(self, chunks: Iterable[bytes]) -> None:
        for chunk in chunks:
            self.write(chunk)

    def close(self) -> None:
        self.file.close()

    def discard(self) -> None:
        self.file.close()
        os.unlink(self.path)


class MountFolder(FolderResource):
    """A folder of a mount: its listing leaves out what the provider would refuse and the
    uploads under way, and the mount's own directory cannot be deleted (a DELETE of it
    would empty the user's home)."""

    def __init__(
        self, path: str, environ: dict[str, Any], file_path: str, provider: MountProvider
    ) -> None:
        super().__init__(path, environ, file_path)
        self.directory = file_path
        self.mount_provider = provider

    def get_member_names(self) -> list[str]:
        names = []
        for name in sorted(os.listdir(self.directory)):
            if name.startswith(".") and name.endswith(UPLOAD):
                continue  # An upload under way (or one its server died during).
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

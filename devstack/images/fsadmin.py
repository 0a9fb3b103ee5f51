"""The local stack's maintenance image ("fsadmin"), run as the admin pod's container process.

A real maintenance image starts a root shell that waits for an administrator to ``kubectl
exec`` into it. On start it tells its log what it holds, so that whoever starts it sees the
pod got what was configured: one line per mounted file system, at its path under the mount
prefix, saying whether it is writable. Then it waits, doing nothing, until it is told to stop
(SIGTERM, as a pod's deletion sends) and exits 0 at once.

The pod tells it its mounts in its environment (``MOUNT_PREFIX`` and one ``ADMIN_MOUNT_<NAME>``
per volume, which the service's builder sets). The local stack rewrites each mount's path to the
directory that stands for it, whose last component is still the volume's name, so the line names
the path the pod would show. Writability is tried, not guessed from modes: a file is created
and removed, as a repair would need to.

Run by path with the stack's Python; it needs nothing but the standard library.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

MOUNT_PREFIX_ENV = "MOUNT_PREFIX"
MOUNT_ENV_PREFIX = "ADMIN_MOUNT_"


def mounts(env: Mapping[str, str]) -> list[tuple[str, Path]]:
    """Each mount as (the path the pod shows, the directory to use), by path."""
    prefix = (env.get(MOUNT_PREFIX_ENV) or "/mnt").rstrip("/")
    found = [
        (f"{prefix}/{Path(value).name}", Path(value))
        for key, value in env.items()
        if key.startswith(MOUNT_ENV_PREFIX) and value
    ]
    return sorted(found)


def writable(directory: Path) -> bool:
    """Whether a file can be created (and removed) in ``directory``."""
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".fsadmin-probe-"):
            return True
    except OSError:
        return False


def describe(env: Mapping[str, str]) -> list[str]:
    """The lines the log gets: one per mount, then the wait."""
    lines = []
    for shown, directory in mounts(env):
        if not directory.is_dir():
            lines.append(f"mount {shown}: missing")
        else:
            lines.append(f"mount {shown}: {'writable' if writable(directory) else 'read-only'}")
    if not lines:
        lines.append("no mounts")
    lines.append("fsadmin ready; waiting for SIGTERM")
    return lines


def main() -> int:
    def stop(signum: int, frame: FrameType | None) -> None:
        print("fsadmin stopping", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    for line in describe(os.environ):
        print(line, flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())

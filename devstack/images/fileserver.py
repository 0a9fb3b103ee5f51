"""The local stack's file-server image: the repository's WebDAV server, run as the container's
process.

The real image runs ``python -m fileserver`` (the Dockerfile's ``fileserver`` stage), configured
by the ``FILESERVER_*`` variables the service's Job gives it, and listens on every address of its
pod. Pods of the local stack share the machine's network, each with its own loopback address
(``POD_IP``), so here it listens on that address alone (``FILESERVER_HOST``), as the lab and app
programs do: two users' servers at the same port must not collide. Its mounts' paths arrive
rewritten to the pod's volume directories by the process runtime (``FILESERVER_MOUNTS`` is a JSON
list of paths, rewritten string by string).

Run by path with the stack's Python, whose environment has the server's dependencies
(``fileserver/requirements.txt``); the package itself is imported from the repository.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

IMAGES_DIR = Path(__file__).resolve().parent
REPO_ROOT = IMAGES_DIR.parent.parent


def importable_path(path: list[str]) -> list[str]:
    """``sys.path`` with the repository first and without this folder, which Python puts first
    for a script run by path: this file's name would hide the ``fileserver`` package."""
    kept = [entry for entry in path if Path(entry or ".").resolve() != IMAGES_DIR]
    return [str(REPO_ROOT), *kept]


def main() -> int:
    os.environ["FILESERVER_HOST"] = os.environ.get("POD_IP") or "127.0.0.1"
    sys.path[:] = importable_path(sys.path)
    from fileserver.server import main as serve

    return serve()


if __name__ == "__main__":
    sys.exit(main())

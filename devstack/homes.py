"""The demo users' home directories, on the file system the local stack's nodes share.

On a platform the lab's init container (``provision-home`` in the demo configuration) makes
``/home/<user>`` on the home volume, as root, before the lab starts. The local stack does not run
it as a process (it would change the machine's own ``/home``); instead the stack makes each demo
user's home directory when it starts, on the nodes' shared file system
(``ClusterSettings.node_files``), under the host path of the lab's volume that holds ``HOME``. A
lab and its user's file server, both mounting that host path, then find the directory there, and
the lab's ``HOME`` is it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

HOME = "/home/{username}"
"""A lab's ``HOME``, as the service sets it for every lab."""


def home_host_path(lab: Mapping[str, Any], username: str) -> str | None:
    """The host path of ``username``'s home directory, from the service's ``lab`` section: the
    lab's mount holding ``HOME`` (the longest such mount path), if its volume is a host path;
    None when no host path volume holds it."""
    home = HOME.format(username=username)
    chosen: tuple[str, Mapping[str, Any]] | None = None
    for mount in lab.get("volumeMounts") or []:
        mount_path = str(mount.get("mountPath") or "").rstrip("/") or "/"
        holds = home == mount_path or home.startswith(mount_path.rstrip("/") + "/")
        if holds and (chosen is None or len(mount_path) > len(chosen[0])):
            chosen = (mount_path, mount)
    if chosen is None:
        return None
    mount_path, mount = chosen
    volumes = {str(v.get("name")): v for v in lab.get("volumes") or []}
    volume = volumes.get(str(mount.get("volumeName")))
    if volume is None or volume.get("type") != "hostPath" or not volume.get("path"):
        return None
    below = home[len(mount_path) :].lstrip("/")
    return posixpath.join(str(volume["path"]), str(mount.get("subPath") or ""), below)


def provision_homes(
    lab: Mapping[str, Any], usernames: Iterable[str], host_path: Callable[[str], Path]
) -> list[Path]:
    """Make each user's home directory where ``host_path`` puts host paths (the process
    runtime's :meth:`~devstack.kube.cluster.processes.ProcessRuntime.host_path`); the
    directories, existing ones included."""
    made = []
    for username in usernames:
        path = home_host_path(lab, username)
        if path is None:
            continue
        directory = host_path(path)
        directory.mkdir(parents=True, exist_ok=True)
        made.append(directory)
    return made

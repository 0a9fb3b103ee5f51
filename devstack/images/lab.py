"""The local stack's lab image: its start-up script, run as the lab container's process.

A real lab image's entrypoint starts JupyterHub's single-user server with the environment the
spawn gave the pod (``JUPYTERHUB_*`` from the hub, the lab's ConfigMap and Secret), listening
on every address of its pod. Pods of the local stack share the machine's network, each with its
own loopback address (``POD_IP``), so here the server listens on that address alone, at the
port the hub asked for (the lab port when the hub left it open).

It starts in the user's ``HOME``, as a lab image's start-up script does, so JupyterLab's file
browser opens there: on the local stack that is the user's directory on the nodes' shared file
system (the home volume's host path), which the user's file server serves too.

A lab spawned without JupyterHub (a call to the API, say) has no ``JUPYTERHUB_SERVICE_URL``:
it runs a plain JupyterLab on the same address, with Jupyter's own token, which it prints to
its log (``pods/<name>/log``).

Like a platform's lab image, it offers a remote kernel (``python -m labspawner.kernels
install``): "Python 3 (remote, small)" runs its kernel in a pod of its own through the service.

Run by path with the stack's Python, so it needs nothing but the standard library here and the
Jupyter packages (and the service's client) beside that Python.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

LAB_PORT = 8888
"""The port the service's ``lab.port`` names by default."""


def command(
    env: dict[str, str], scripts: Path, *, as_root: bool
) -> tuple[list[str], dict[str, str]]:
    """The server's command line and environment, from the container's environment.

    Processes of the local stack run as the stack's own user, whatever the pod's
    ``runAsUser``; Jupyter refuses root unless told, so a stack run as root tells it.
    """
    address = env.get("POD_IP") or "127.0.0.1"
    env = dict(env)
    root = ["--ServerApp.allow_root=True"] if as_root else []
    service_url = env.get("JUPYTERHUB_SERVICE_URL")
    if service_url:
        parts = urlsplit(service_url)
        port = parts.port or LAB_PORT
        env["JUPYTERHUB_SERVICE_URL"] = urlunsplit(parts._replace(netloc=f"{address}:{port}"))
        return [str(scripts / "jupyterhub-singleuser"), *root], env
    argv = [str(scripts / "jupyter"), "lab", f"--ip={address}", f"--port={LAB_PORT}"]
    return [*argv, "--no-browser", "--ServerApp.port_retries=0", *root], env


REMOTE_KERNEL = "python-remote"
REMOTE_KERNEL_SIZE = "small"
"""The remote kernel the local stack's labs offer, of a size its configuration has."""


def offer_remote_kernel() -> None:
    """Write the remote kernel's kernelspec where this lab's Jupyter finds it (the user's
    Jupyter data directory, under the pod's ``HOME``), as an image's build would under its
    prefix."""
    from labspawner.kernels.kernelspec import install

    install(REMOTE_KERNEL, size=REMOTE_KERNEL_SIZE)


def main() -> None:
    home = os.environ.get("HOME")
    if home and os.path.isdir(home):
        os.chdir(home)
    offer_remote_kernel()
    argv, env = command(dict(os.environ), Path(sys.executable).parent, as_root=os.geteuid() == 0)
    sys.stdout.flush()
    os.execve(argv[0], argv + sys.argv[1:], env)  # noqa: S606 - the image's own server


if __name__ == "__main__":
    main()

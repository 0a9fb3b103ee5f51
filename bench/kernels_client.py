"""The kernels benchmark's client, in its own process: ``python -m bench.kernels_client``.

Reads a job (JSON) on stdin and writes results (JSON) on stdout. It is what a lab's Jupyter
server does when a notebook opens: a ``KernelManager`` starts the kernel a kernelspec names,
a client executes ``2 + 2`` and reads the reply, and the manager shuts the kernel down. Each
round does that once with the remote kernelspec (the ``lab-spawner`` provisioner: a pod
through the service) and once with the local ``python3`` kernelspec (a process that
jupyter_client starts itself), the two in alternating order so that neither always goes
first. The service's URL, the user's token and name come from the environment, as in a lab.

Between rounds the client waits until the service no longer lists the remote kernel, so
that every start is of a fresh kernel on an otherwise idle stack.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from labspawner import LabSpawnerClient

LOCAL_KERNEL = "python3"
REPLY_TIMEOUT = 120.0


def one_kernel(specs: KernelSpecManager, name: str) -> dict[str, float | str]:
    """Start kernel ``name``, execute ``2 + 2``, shut it down; the times of each step (s)."""
    manager = KernelManager(kernel_spec_manager=specs, kernel_name=name)
    began = time.monotonic()
    manager.start_kernel()
    started = time.monotonic()
    client = manager.client()
    client.start_channels()
    try:
        msg_id = client.execute("2 + 2", silent=False, store_history=False)
        deadline = time.monotonic() + REPLY_TIMEOUT
        while True:
            reply = client.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        replied = time.monotonic()
        status = str(reply["content"]["status"])
    finally:
        client.stop_channels()
    kernel_id = str(manager.kernel_id)
    manager.shutdown_kernel()
    shut = time.monotonic()
    return {
        "kernel_id": kernel_id,
        "status": status,
        "start_kernel_seconds": started - began,
        "first_reply_seconds": replied - began,
        "shutdown_seconds": shut - replied,
    }


def main() -> int:
    job: dict[str, Any] = json.load(sys.stdin)
    specs = KernelSpecManager(kernel_dirs=[job["kernels_dir"]], ensure_native_kernel=True)
    remote = str(job["remote_kernel"])
    user = os.environ["JUPYTERHUB_USER"]
    service = LabSpawnerClient()
    rounds: list[dict[str, Any]] = []
    for index in range(int(job["rounds"])):
        order = [remote, LOCAL_KERNEL] if index % 2 == 0 else [LOCAL_KERNEL, remote]
        measured: dict[str, Any] = {}
        for name in order:
            result = one_kernel(specs, name)
            if name == remote:
                asked = time.monotonic()
                service.kernels.wait_gone(user, str(result["kernel_id"]), timeout=120)
                result["unlisted_after_shutdown_seconds"] = time.monotonic() - asked
            measured["remote" if name == remote else "local"] = result
        rounds.append(measured)
    service.close()
    json.dump({"rounds": rounds}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

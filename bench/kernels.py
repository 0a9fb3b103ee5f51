"""Benchmark: a remote kernel's start against a local one's, as a notebook's user waits for it.

The local stack runs as ``make run`` runs it (each lab, and each kernel pod, a real process:
the kernel pod's ipykernel listens on its own loopback address), the service's log going to a
file. One user's lab is spawned
first (not measured). Then a client in its own process (``bench.kernels_client``), with the
lab's environment, does what a Jupyter server does when a notebook opens, ``rounds`` times
with each kernelspec: ``KernelManager.start_kernel()``, execute ``2 + 2`` and read the reply,
shut down. The remote kernelspec is the one ``python -m labspawner.kernels install`` writes
(the ``lab-spawner`` provisioner, a pod of the lab's size through the service); the local one
is ``python3``, an ipykernel that jupyter_client starts itself. Both kernels are the same
ipykernel on the same machine, so the difference is what the service, the emulated
Kubernetes and the provisioner's polling add.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests
from labspawner.kernels.kernelspec import install

from app.runtime.defaults import default_workers
from bench.services import log_findings, start_service
from bench.stats import median, summary_ms
from devstack.stack import REPO_ROOT, LocalStack, StackOptions

USER = "rachel"
"""A demo user who may spawn a lab (and so have kernels)."""
REMOTE_KERNEL = "remote-small"
SIZE = "small"
CLIENT = "bench.kernels_client"
LAB_TIMEOUT = 120.0
SPAWN = {"options": {"image_class": "recommended", "size": SIZE}, "env": {}}


def _until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen in {timeout:g} s")
        time.sleep(0.1)


def _lab_running(stack: LocalStack, tokens: dict[str, str]) -> None:
    """Spawn the user's lab with the user's token and wait until the service says it runs."""
    base = f"{stack.spawner_url}/spawner/v1/labs/{USER}"
    response = requests.post(
        f"{base}/spawn",
        headers={"Authorization": f"Bearer {tokens[USER]}"},
        json=SPAWN,
        allow_redirects=False,
        timeout=30,
    )
    if response.status_code != 303:
        raise RuntimeError(f"spawn refused: {response.status_code} {response.text[:200]}")
    admin = {"Authorization": f"Bearer {tokens['admin']}"}

    def running() -> bool:
        status = requests.get(base, headers=admin, timeout=30).json().get("status")
        if status == "failed":
            raise RuntimeError(f"{USER}'s lab failed to start")
        return bool(status == "running")

    _until(running, LAB_TIMEOUT, f"{USER}'s lab running")


def _client(stack: LocalStack, tokens: dict[str, str], kernels_dir: Path, rounds: int) -> Any:
    """Run the client with the lab's environment; its rounds."""
    env = {
        **os.environ,
        "LAB_SPAWNER_URL": stack.spawner_url,
        "ACCESS_TOKEN": tokens[USER],
        "JUPYTERHUB_USER": USER,
    }
    env.pop("LAB_SPAWNER_TOKEN", None)
    job = {"kernels_dir": str(kernels_dir), "remote_kernel": REMOTE_KERNEL, "rounds": rounds}
    completed = subprocess.run(
        [sys.executable, "-m", CLIENT],
        input=json.dumps(job).encode(),
        capture_output=True,
        cwd=str(REPO_ROOT),
        env=env,
        timeout=600,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{CLIENT} failed: {completed.stderr.decode()[-2000:]}")
    return json.loads(completed.stdout)["rounds"]


def _phases(rounds: list[dict[str, Any]], side: str) -> dict[str, Any]:
    runs = [r[side] for r in rounds]
    phases = {
        "start_kernel": summary_ms([r["start_kernel_seconds"] for r in runs]),
        "first_reply": summary_ms([r["first_reply_seconds"] for r in runs]),
        "shutdown": summary_ms([r["shutdown_seconds"] for r in runs]),
        "replies_ok": sum(1 for r in runs if r["status"] == "ok"),
    }
    if side == "remote":
        phases["unlisted_after_shutdown"] = summary_ms(
            [r["unlisted_after_shutdown_seconds"] for r in runs]
        )
    return phases


def run(workdir: Path, *, rounds: int = 10, api_latency: float = 0.0) -> dict[str, Any]:
    """Start ``rounds`` remote and ``rounds`` local kernels, one at a time; their timings."""
    workers = default_workers()
    options = StackOptions(
        state_dir=workdir / f"kernels-{int(api_latency * 1000)}ms",
        real_labs=True,
        pull_seconds=0.0,
        api_latency=api_latency,
        workers=workers,
    )
    stack = LocalStack(options).start(spawner=False)
    log_path = workdir / f"kernels-{int(api_latency * 1000)}ms-service.log"
    service = start_service(stack, port=stack.spawner_port, workers=workers, log_path=log_path)
    try:
        tokens = {name: entry["token"] for name, entry in stack.state()["tokens"].items()}
        _lab_running(stack, tokens)
        kernels_dir = workdir / "kernelspecs"
        install(REMOTE_KERNEL, size=SIZE, prefix=kernels_dir)
        measured = _client(stack, tokens, kernels_dir / "share" / "jupyter" / "kernels", rounds)
    finally:
        service.stop()
        stack.stop()
    remote, local = _phases(measured, "remote"), _phases(measured, "local")
    remote_p50 = median([r["remote"]["first_reply_seconds"] for r in measured])
    local_p50 = median([r["local"]["first_reply_seconds"] for r in measured])
    return {
        "rounds": rounds,
        "api_latency_ms": round(api_latency * 1000, 1),
        "workers": workers,
        "size": SIZE,
        "remote": remote,
        "local": local,
        "first_reply_remote_minus_local_p50_ms": round((remote_p50 - local_p50) * 1000, 1),
        "first_reply_ratio_p50": round(remote_p50 / local_p50, 2) if local_p50 else None,
        "service_log": log_findings(log_path),
    }

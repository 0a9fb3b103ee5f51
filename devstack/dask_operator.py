"""The dask-kubernetes operator, run beside the emulated cluster as its documentation runs it.

A platform installs the operator's Helm chart; its controller is the ``dask_kubernetes``
package's kopf handlers, which the chart's Deployment starts with ``kopf run --all-namespaces``.
The local stack and the tests run that same controller as a child process, with its own
packages (``devstack.virtualenvs``), against the emulator's API (``kopf run --standalone``: one
operator, no peering), with the emulator's kubeconfig, so a ``DaskCluster`` becomes the
scheduler Deployment, its Service, the ``DaskWorkerGroup`` and the workers' Deployments that
the real operator makes. Its CRDs are the package's own (``devstack.kube.crds``). Service names
resolve through the stack's cluster DNS (``devstack.cluster_dns``): the operator asks the
scheduler to retire workers by name.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import IO

from devstack.launch import launched
from devstack.readiness import await_url
from devstack.redis_process import free_port
from devstack.virtualenvs import dask_operator_python


class DaskOperatorProcess:
    """``kopf run`` of the dask-kubernetes controller, as a child process."""

    def __init__(self, kubeconfig: Path, log_path: Path, env: dict[str, str]) -> None:
        """``env``: what the process adds to this one's environment (the cluster DNS's)."""
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self._env = env
        self._process: subprocess.Popen[bytes] | None = None
        self._port = 0
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The operator's process id while it runs."""
        return self._process.pid if self._process is not None else None

    def start(self, timeout: float = 60.0) -> DaskOperatorProcess:
        """Start the operator and return once its liveness endpoint answers."""
        return self.launch().await_ready(timeout)

    def launch(self) -> DaskOperatorProcess:
        """Start the operator and return at once: ``await_ready`` waits for it, so that a
        stack starts the service meanwhile (the operator's start is its longest step, and a
        cluster made before it is ready is reconciled once it is, as in a cluster)."""
        self._port = free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - held while the process runs
        command = [
            dask_operator_python(),
            "-m",
            "kopf",
            "run",
            "--standalone",
            "--all-namespaces",
            "--liveness",
            f"http://127.0.0.1:{self._port}/healthz",
            "-m",
            "dask_kubernetes.operator.controller",
        ]
        env = {**_inherited(), **self._env, "KUBECONFIG": str(self.kubeconfig)}
        self._process = subprocess.Popen(
            launched(command),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        return self

    def await_ready(self, timeout: float = 60.0) -> DaskOperatorProcess:
        """Wait until the launched operator's liveness endpoint answers; stop it and raise
        if it exits or does not answer in ``timeout`` seconds."""
        try:
            await_url(
                f"http://127.0.0.1:{self._port}/healthz",
                timeout,
                self._process,
                "the Dask operator",
            )
        except RuntimeError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM, as a pod's deletion sends it; SIGKILL after 10 s."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


def _inherited() -> dict[str, str]:
    """This process's environment, without what would point the operator elsewhere."""
    return {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "PYTHONPATH")}

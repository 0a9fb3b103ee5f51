"""The remote kernel notebook (``notebooks/remote-kernel.ipynb``), executed in a lab on the
stack ``make run`` starts: the lab is the README's first call (a plain API call, no JupyterHub),
the notebook's kernel has exactly the environment of the lab's own Jupyter server, and the
kernel it starts through Jupyter's ``KernelManager`` runs as a real ipykernel in a pod of its
own, and what it computes there is checked."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.stack import LocalStack
from tests.support.notebooks import (
    NOTEBOOKS,
    all_printed,
    execute,
    printed,
    process_environment,
)
from tests.support.real_labs import running_lab

NOTEBOOK = NOTEBOOKS / "remote-kernel.ipynb"
USER = "rachel"


@pytest.fixture
def user_lab(real_lab_stack: LocalStack, real_tokens: dict[str, str]) -> Iterator[dict[str, str]]:
    with running_lab(real_lab_stack, real_tokens, USER):
        yield real_tokens


def lab_environment(stack: LocalStack, user: str) -> dict[str, str]:
    """The environment the user's lab server runs with: what its notebooks' kernels get."""
    pod = stack.kube.store.get("pods", f"nublado-{user}", f"nb-{user}-lab")
    assert pod is not None
    (pid, *_) = stack.kube.cluster.processes.running(str(pod["metadata"]["uid"]))
    return process_environment(pid)


@pytest.mark.slow
def test_the_notebook_runs_code_on_a_remote_kernel_and_shuts_it_down(
    real_lab_stack: LocalStack,
    user_lab: dict[str, str],
    python3_kernel: None,
    tmp_path: Path,
) -> None:
    env = lab_environment(real_lab_stack, USER)
    # Spawned without JupyterHub: nothing of JupyterHub's says whose lab it is.
    assert "JUPYTERHUB_USER" not in env and env["ACCESS_TOKEN"] == user_lab[USER]
    lab_ip = env["POD_IP"]

    executed = execute(NOTEBOOK, tmp_path, env=env)

    assert "Provisioner: lab-spawner {'size': 'small'}" in printed(executed, "provisioner =")
    started = printed(executed, "manager.start_kernel()")
    found = re.search(r"^Kernel [0-9a-f-]+: running at (127\.[\d.]+), size small$", started, re.M)
    assert found, started
    # The kernel's own address (its pod's), not the notebook's.
    says = re.search(
        r"^The remote kernel at (\S+) says 42; this notebook runs at (\S+)$", started, re.M
    )
    assert says and says.group(2) == lab_ip, started
    assert says.group(1) == found.group(1) != lab_ip, started
    assert (
        printed(executed, "manager.interrupt_kernel") == "Interrupted: error (KeyboardInterrupt)\n"
    )
    assert printed(executed, "manager.shutdown_kernel()") == "Shut down; kernels left: none\n"
    assert user_lab[USER] not in all_printed(executed)
    pods = real_lab_stack.kube.store.list("pods", f"nublado-{USER}")
    assert not [p for p in pods if p["metadata"]["name"].startswith("kernel-")]

"""The remote kernel notebook (``notebooks/remote-kernel.ipynb``), executed as in a lab on the
stack ``make run`` starts: the kernel it starts through Jupyter's ``KernelManager`` runs as a
real ipykernel in a pod of its own, and what it computes there is checked."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.stack import LocalStack
from tests.support.notebooks import NOTEBOOKS, all_printed, execute, printed
from tests.support.real_labs import running_lab

NOTEBOOK = NOTEBOOKS / "remote-kernel.ipynb"
USER = "rachel"


@pytest.fixture
def user_lab(real_lab_stack: LocalStack, real_tokens: dict[str, str]) -> Iterator[dict[str, str]]:
    with running_lab(real_lab_stack, real_tokens, USER):
        yield real_tokens


@pytest.mark.slow
def test_the_notebook_runs_code_on_a_remote_kernel_and_shuts_it_down(
    real_lab_stack: LocalStack,
    user_lab: dict[str, str],
    python3_kernel: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.delenv("LAB_SPAWNER_TOKEN", raising=False)
    monkeypatch.setenv("LAB_SPAWNER_URL", real_lab_stack.spawner_url)
    monkeypatch.setenv("ACCESS_TOKEN", user_lab[USER])
    monkeypatch.setenv("JUPYTERHUB_USER", USER)
    monkeypatch.setenv("POD_IP", "127.0.0.1")

    executed = execute(NOTEBOOK, tmp_path)

    assert "Provisioner: lab-spawner {'size': 'small'}" in printed(executed, "provisioner =")
    started = printed(executed, "manager.start_kernel()")
    found = re.search(r"^Kernel [0-9a-f-]+: running at (127\.[\d.]+), size small$", started, re.M)
    assert found, started
    # The kernel's own address (its pod's), not the notebook's.
    says = re.search(
        r"^The remote kernel at (\S+) says 42; this notebook runs at 127\.0\.0\.1$", started, re.M
    )
    assert says and says.group(1) == found.group(1) != "127.0.0.1", started
    assert (
        printed(executed, "manager.interrupt_kernel") == "Interrupted: error (KeyboardInterrupt)\n"
    )
    assert printed(executed, "manager.shutdown_kernel()") == "Shut down; kernels left: none\n"
    assert user_lab[USER] not in all_printed(executed)
    pods = real_lab_stack.kube.store.list("pods", f"nublado-{USER}")
    assert not [p for p in pods if p["metadata"]["name"].startswith("kernel-")]

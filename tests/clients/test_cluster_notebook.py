"""The Dask cluster notebook (``notebooks/dask-cluster.ipynb``), executed as in a lab on the
stack ``make run`` starts: the cluster it creates through the service runs its scheduler and
workers as real Dask processes, and the computation it runs there is checked."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.stack import LocalStack
from tests.labs.conftest import wait_for
from tests.support.notebooks import NOTEBOOKS, all_printed, execute, printed
from tests.support.real_labs import running_lab

NOTEBOOK = NOTEBOOKS / "dask-cluster.ipynb"
USER = "rachel"


@pytest.fixture
def rachel_lab(real_lab_stack: LocalStack, real_tokens: dict[str, str]) -> Iterator[dict[str, str]]:
    """Rachel's running lab on the real-labs stack; it goes, with her clusters, after."""
    with running_lab(real_lab_stack, real_tokens, USER):
        yield real_tokens


@pytest.mark.slow
def test_the_notebook_computes_on_a_dask_cluster_it_creates_scales_and_deletes(
    real_lab_stack: LocalStack,
    rachel_lab: dict[str, str],
    python3_kernel: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    for name in ("LAB_SPAWNER_TOKEN", "JUPYTERHUB_USER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LAB_SPAWNER_URL", real_lab_stack.spawner_url)
    monkeypatch.setenv("ACCESS_TOKEN", rachel_lab[USER])

    executed = execute(NOTEBOOK, tmp_path)

    created = printed(executed, "dask_client(username")
    name = re.search(r"^Cluster:\s+(dask-\w+) \(running\)$", created, re.MULTILINE)
    assert name, created
    # On the local stack the scheduler is reached at its Service's forwarded cluster IP.
    assert re.search(r"^Scheduler:\s+tcp://127\.[\d.]+:8786$", created, re.MULTILINE), created
    assert re.search(r"^Workers:\s+1 of at most 2$", created, re.MULTILINE), created
    assert printed(executed, "numbers.sum()") == f"Sum: {sum(range(1_000_000))}\n"
    scaled = printed(executed, "clusters.scale(")
    assert "Scaled to 2 workers (capped: False)" in scaled
    assert re.search(r"^Workers:\s+2$", scaled, re.MULTILINE), scaled
    assert f"Sum of squares: {sum(i * i for i in range(1_000_000))}" in scaled
    assert printed(executed, "clusters.delete(") == (
        f"Deleted {name.group(1)}; clusters left: none\n"
    )
    assert rachel_lab[USER] not in all_printed(executed)

    # The cluster's pods go with it; the lab stays.
    def pods() -> list[str]:
        return [
            p["metadata"]["name"] for p in real_lab_stack.kube.store.list("pods", f"nublado-{USER}")
        ]

    wait_for(lambda: not [p for p in pods() if p.startswith(name.group(1))])
    assert f"nb-{USER}-lab" in pods()

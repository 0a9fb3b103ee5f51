"""A Dask cluster on the stack ``make run`` starts, made by the real dask-kubernetes operator:
its scheduler and workers are real Dask processes, a scale-down retires a worker through the
scheduler (the operator asks it which to close), a new worker tier reaches the workers the
operator makes next, and a deletion takes every object and process with it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from distributed import Client

from devstack.stack import LocalStack
from tests.labs.conftest import wait_for
from tests.support.real_labs import running_lab

USER = "rachel"
NAMESPACE = f"nublado-{USER}"


@pytest.fixture
def rachel(real_lab_stack: LocalStack, real_tokens: dict[str, str]) -> Iterator[dict[str, str]]:
    """Rachel's headers, her lab running (clusters live beside it); it goes after."""
    with running_lab(real_lab_stack, real_tokens, USER):
        yield {"Authorization": f"Bearer {real_tokens[USER]}"}


def _worker_deployments(stack: LocalStack, name: str) -> dict[str, dict[str, Any]]:
    return {
        d["metadata"]["name"]: d
        for d in stack.kube.store.list("deployments", NAMESPACE)
        if (d["metadata"].get("labels") or {}).get("dask.org/component") == "worker"
        and d["metadata"]["name"].startswith(f"{name}-default-worker-")
    }


def _cpu_request(template_spec: dict[str, Any]) -> str:
    return str(template_spec["containers"][0]["resources"]["requests"]["cpu"])


@pytest.mark.slow
def test_the_real_operator_runs_scales_retires_and_deletes_a_cluster(
    real_lab_stack: LocalStack, rachel: dict[str, str]
) -> None:
    base = real_lab_stack.spawner_url
    created = requests.post(
        f"{base}/spawner/v1/labs/{USER}/clusters",
        json={"kind": "daskclusters", "workers": 2, "max_workers": 3, "worker_tier": "small"},
        headers=rachel,
        timeout=10,
    )
    assert created.status_code == 201, created.text
    name = created.json()["name"]

    def running() -> dict[str, Any] | None:
        answer = requests.get(
            f"{base}/spawner/v1/labs/{USER}/clusters/{name}", headers=rachel, timeout=10
        ).json()
        return answer if answer["status"] == "running" else None

    cluster = wait_for(running, timeout=60)
    # The operator's own objects, as it names them.
    store = real_lab_stack.kube.store
    assert store.get("daskworkergroups", NAMESPACE, f"{name}-default") is not None
    assert store.get("deployments", NAMESPACE, f"{name}-scheduler") is not None

    with Client(cluster["scheduler_address"], timeout=30) as client:
        client.wait_for_workers(2, timeout=60)
        first = set(_worker_deployments(real_lab_stack, name))
        # Each worker is named after its Deployment, as the operator tells it.
        assert {w["name"] for w in client.scheduler_info()["workers"].values()} == first

        scaled = requests.patch(
            f"{base}/ddl_cluster_scaler/scale/daskclusters/{name}",
            json={"replicas": 1, "worker_hw_tier_name": "medium"},
            headers=rachel,
            timeout=10,
        )
        assert scaled.status_code == 200, scaled.text
        # The operator asks the scheduler which worker to retire, then deletes its Deployment.
        wait_for(lambda: len(client.scheduler_info()["workers"]) == 1, timeout=60)
        wait_for(lambda: len(_worker_deployments(real_lab_stack, name)) == 1, timeout=30)
        (kept,) = _worker_deployments(real_lab_stack, name)
        assert kept in first
        assert {w["name"] for w in client.scheduler_info()["workers"].values()} == {kept}
        group = store.get("daskworkergroups", NAMESPACE, f"{name}-default")
        assert group is not None and _cpu_request(group["spec"]["worker"]["spec"]) == "2"

        grown = requests.patch(
            f"{base}/ddl_cluster_scaler/scale/daskclusters/{name}",
            json={"replicas": 2},
            headers=rachel,
            timeout=10,
        )
        assert grown.status_code == 200, grown.text
        client.wait_for_workers(2, timeout=60)
        deployments = _worker_deployments(real_lab_stack, name)
        (new,) = set(deployments) - {kept}
        # The worker made after the tier change has it; the one kept has its own still.
        assert _cpu_request(deployments[new]["spec"]["template"]["spec"]) == "2"
        assert _cpu_request(deployments[kept]["spec"]["template"]["spec"]) == "1"
        assert client.submit(sum, range(10)).result(timeout=30) == 45

    deleted = requests.delete(
        f"{base}/spawner/v1/labs/{USER}/clusters/{name}", headers=rachel, timeout=10
    )
    assert deleted.status_code == 202, deleted.text

    def left() -> list[str]:
        return [
            f"{plural}/{o['metadata']['name']}"
            for plural in ("daskclusters", "daskworkergroups", "deployments", "services", "pods")
            for o in store.list(plural, NAMESPACE)
            if o["metadata"]["name"].startswith(name)
        ]

    # The garbage collector takes what the cluster owned, and the kubelet its processes.
    wait_for(lambda: not left(), timeout=60)

"""Clusters are run beside labs: the lab tests' fixtures, the operators' CRDs in the shared
emulator, a configuration with tiers and budgets, and the calls the tests make."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from app.config import Config, parse_config
from app.workloads.cluster.kind import ClusterKind
from devstack.dask_operator import DaskOperatorProcess
from devstack.kube import KubernetesEmulator
from devstack.kube.crds import OPERATOR_CRDS, crd
from tests.labs.conftest import (
    LabUser,
    admin_headers,
    lab_raw_config,
    new_user,
    read_events,
    spawn_body,
    wait_for,
)

__all__ = ["admin_headers", "lab_raw_config", "new_user"]

CLUSTERS = {
    "tiers": [
        {"name": "small", "cores": "500m", "coresLimit": 1, "memory": "1Gi"},
        {"name": "large", "cores": 1, "coresLimit": 2, "memory": "2Gi"},
        # No node of the emulated cluster is in this pool: its pods are never scheduled.
        {"name": "elsewhere", "cores": "500m", "memory": "1Gi", "nodePool": "nowhere"},
        {"name": "gpu", "cores": 2, "memory": "8Gi", "gpus": 1, "kinds": ["rayclusters"]},
    ],
    "maxWorkers": 10,
}
BUDGETS = {
    "default": {"clusters": 1, "workers": 3, "cpu": 8, "memory": "32Gi", "gpus": 0},
    "groups": [{"group": "science", "clusters": 3, "workers": 8, "cpu": 16, "memory": "64Gi"}],
}


@pytest.fixture
def operators(kube: KubernetesEmulator) -> None:
    """The operators' CRDs in the shared emulator (installed once, by its administrator)."""
    for plural in OPERATOR_CRDS:
        if (
            kube.served.by_plural(plural) is None
            and kube.store.get("customresourcedefinitions", None, crd(plural)["metadata"]["name"])
            is None
        ):
            kube.store.create("customresourcedefinitions", crd(plural))
    wait_for(lambda: all(kube.served.by_plural(p) for p in OPERATOR_CRDS))


OPERATOR_LOG_LINES = 40
"""How much of the Dask operator's log a failed test prints."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keeps each phase's report on the test, for ``nothing_left`` to see a failed call."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


def what_the_cluster_held(kube: KubernetesEmulator, namespaces: set[str]) -> str:
    """The pods of ``namespaces`` with their phases and containers' states, and the events
    there: printed when a test fails, so that a cluster that never ran says where it stopped."""
    lines = []
    for namespace in sorted(namespaces):
        for pod in kube.store.list("pods", namespace):
            status = pod.get("status") or {}
            states = [
                next(iter(c.get("state") or {"unknown": None}))
                for c in status.get("containerStatuses") or []
            ]
            lines.append(
                f"pod {namespace}/{pod['metadata']['name']}: {status.get('phase')}, "
                f"node {pod['spec'].get('nodeName')}, containers {states}"
            )
        for event in kube.store.list("events", namespace):
            involved = event.get("involvedObject") or {}
            lines.append(
                f"event {namespace} {involved.get('kind')}/{involved.get('name')}: "
                f"{event.get('reason')}: {event.get('message')}"
            )
    return "\n".join(lines)


@pytest.fixture(autouse=True)
def nothing_left(kube: KubernetesEmulator, request: pytest.FixtureRequest) -> Iterator[None]:
    """Every lab namespace a test made goes when it ends, with its lab and clusters: the
    emulator is shared by the whole run, and clusters' pods would fill its nodes. A test
    that failed first prints what its namespaces held (``what_the_cluster_held``)."""
    before = {n["metadata"]["name"] for n in kube.store.list("namespaces")}
    yield
    made = {n["metadata"]["name"] for n in kube.store.list("namespaces")} - before
    call = getattr(request.node, "report_call", None)
    if call is not None and call.failed:
        print(what_the_cluster_held(kube, made))
        if "dask_operator" in request.fixturenames:
            operator: DaskOperatorProcess = request.getfixturevalue("dask_operator")
            log = operator.log_path.read_text(errors="replace").splitlines()
            print("the Dask operator's last lines:", *log[-OPERATOR_LOG_LINES:], sep="\n")
    api = kube.api_client()
    try:
        # The clusters first, as a lab's delete does (``app.workloads.lab.delete``): in a
        # namespace being deleted the Dask operator holds a cluster a minute.
        custom = k8s.CustomObjectsApi(api)
        for name in made:
            for kind in ClusterKind.operator_objects:
                with contextlib.suppress(ApiException):
                    custom.delete_collection_namespaced_custom_object(
                        kind.group, kind.version, name, kind.plural
                    )
        wait_for(
            lambda: (
                not any(
                    kube.store.list(kind.plural, name)
                    for name in made
                    for kind in ClusterKind.operator_objects
                )
            )
        )
        core = k8s.CoreV1Api(api)
        for name in made:
            with contextlib.suppress(ApiException):
                core.delete_namespace(name)
    finally:
        api.close()
    wait_for(lambda: not made & {n["metadata"]["name"] for n in kube.store.list("namespaces")})


@pytest.fixture
def tiers_config(operators: None, lab_raw_config: dict[str, Any]) -> dict[str, Any]:
    """The lab tests' configuration with this module's tiers and budgets and the operators'
    CRDs installed: what kernels need, which use the tiers but no operator."""
    raw = copy.deepcopy(lab_raw_config)
    raw["clusters"] = CLUSTERS
    raw["budgets"] = BUDGETS
    return raw


@pytest.fixture
def cluster_config(
    tiers_config: dict[str, Any], dask_operator: DaskOperatorProcess
) -> dict[str, Any]:
    """``tiers_config`` with the real Dask operator running against the shared emulator."""
    return tiers_config


@pytest.fixture
def client(cluster_config: dict[str, Any], make_app: Callable[[Config], Flask]) -> FlaskClient:
    return make_app(parse_config(cluster_config)).test_client()


def with_lab(client: FlaskClient, user: LabUser) -> None:
    response = client.post(
        f"/spawner/v1/labs/{user.username}/spawn", json=spawn_body(), headers=user.headers
    )
    assert response.status_code == 303, response.get_data(as_text=True)
    assert read_events(client, user.username, user.headers)[-1].type == "complete"


def create(client: FlaskClient, user: LabUser, **body: Any) -> Any:
    return client.post(
        f"/spawner/v1/labs/{user.username}/clusters",
        json={"kind": "daskclusters", "workers": 1, **body},
        headers=user.headers,
    )


def running(client: FlaskClient, user: LabUser, name: str) -> dict[str, Any]:
    def is_running() -> dict[str, Any] | None:
        body = client.get(f"/spawner/v1/labs/{user.username}/clusters/{name}", headers=user.headers)
        assert body.status_code == 200, body.get_data(as_text=True)
        data: dict[str, Any] = body.get_json()
        assert data["status"] in ("starting", "running"), data
        return data if data["status"] == "running" else None

    result: dict[str, Any] = wait_for(is_running)
    return result


def running_cluster(client: FlaskClient, user: LabUser, **body: Any) -> dict[str, Any]:
    """A running cluster of the user's (a Dask one unless ``kind`` says), beside a lab."""
    with_lab(client, user)
    created = create(client, user, **body)
    assert created.status_code == 201, created.get_data(as_text=True)
    return running(client, user, created.get_json()["name"])

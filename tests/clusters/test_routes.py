"""The cluster routes end to end, against the emulated cluster and its simulated operators:
creation beside a running lab, the checks a request passes first, budgets, ownership, and
deletion."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from app.engine.kind import StepFailed
from app.extensions.labs import machinery_of
from app.workloads.cluster.adapters import ADAPTERS, ClusterShape, PodShape
from app.workloads.cluster.kind import create_or_adopt, custom_kind
from devstack.gafaelfawr import GroupSpec
from devstack.kube import KubernetesEmulator
from devstack.kube.crds import OPERATOR_CRDS, crd
from tests.labs.conftest import LabUser, read_events, spawn_body, wait_for

CLUSTERS = {
    "tiers": [
        {"name": "small", "cores": "500m", "coresLimit": 1, "memory": "1Gi"},
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


@pytest.fixture
def client(
    operators: None, lab_raw_config: dict[str, Any], make_app: Callable[[Config], Flask]
) -> FlaskClient:
    raw = copy.deepcopy(lab_raw_config)
    raw["clusters"] = CLUSTERS
    raw["budgets"] = BUDGETS
    return make_app(parse_config(raw)).test_client()


def _with_lab(client: FlaskClient, user: LabUser) -> None:
    response = client.post(
        f"/spawner/v1/labs/{user.username}/spawn", json=spawn_body(), headers=user.headers
    )
    assert response.status_code == 303, response.get_data(as_text=True)
    assert read_events(client, user.username, user.headers)[-1].type == "complete"


def _create(client: FlaskClient, user: LabUser, **body: Any) -> Any:
    return client.post(
        f"/spawner/v1/labs/{user.username}/clusters",
        json={"kind": "daskclusters", "workers": 1, **body},
        headers=user.headers,
    )


def _running(client: FlaskClient, user: LabUser, name: str) -> dict[str, Any]:
    def running() -> dict[str, Any] | None:
        body = client.get(f"/spawner/v1/labs/{user.username}/clusters/{name}", headers=user.headers)
        assert body.status_code == 200, body.get_data(as_text=True)
        data: dict[str, Any] = body.get_json()
        assert data["status"] in ("starting", "running"), data
        return data if data["status"] == "running" else None

    result: dict[str, Any] = wait_for(running)
    return result


@pytest.mark.parametrize(
    ("kind", "resource", "address"),
    [
        ("rayclusters", "rayclusters", "ray://{name}-head-svc.{namespace}:10001"),
        ("sparkclusters", "sparkconnects", "sc://{name}-server.{namespace}:15002"),
    ],
)
def test_ray_and_spark_clusters_run_and_go(
    client: FlaskClient,
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
    kind: str,
    resource: str,
    address: str,
) -> None:
    user = new_user()
    _with_lab(client, user)
    created = _create(client, user, kind=kind, workers=2, max_workers=3)
    assert created.status_code == 201, created.get_data(as_text=True)
    name, namespace = created.get_json()["name"], created.get_json()["namespace"]
    running = _running(client, user, name)
    assert running["scheduler_address"] == address.format(name=name, namespace=namespace)
    assert kube.store.get(resource, namespace, name) is not None
    deleted = client.delete(
        f"/spawner/v1/labs/{user.username}/clusters/{name}", headers=user.headers
    )
    assert deleted.status_code == 202
    wait_for(lambda: kube.store.get(resource, namespace, name) is None)


@pytest.mark.parametrize("kind", list(ADAPTERS))
def test_a_resumed_creation_adopts_its_own_object_and_no_other(
    client: FlaskClient, new_user: Callable[..., LabUser], kind: str
) -> None:
    """A worker that dies after creating the object leaves it for the next run to adopt;
    an object of that name that is someone else's stops the creation instead."""
    user = new_user()
    _with_lab(client, user)
    storage = machinery_of(client.application).context.kube
    adapter = ADAPTERS[kind]
    shape = ClusterShape(
        name=f"{kind[:4]}-adopt",
        namespace=f"nublado-{user.username}",
        owner=user.username,
        uid=user.uid,
        gid=user.gid,
        image="registry.test/lsstsqre/sciplat-lab:w_2024_42",
        workers=0,
        max_workers=0,
        worker=PodShape(cpu_request=1, cpu_limit=1, memory=2**30),
        head=PodShape(cpu_request=1, cpu_limit=1, memory=2**30),
    )
    create_or_adopt(storage, adapter, shape)
    create_or_adopt(storage, adapter, shape)  # the resumed run: adopted, no error
    with pytest.raises(StepFailed, match="exists and is not this cluster"):
        create_or_adopt(storage, adapter, replace(shape, owner="someone-else"))
    storage.delete_custom(custom_kind(adapter), shape.namespace, shape.name)


def test_a_cluster_runs_beside_the_lab_and_goes_on_delete(
    client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    user = new_user()
    assert _create(client, user).status_code == 409, "no running lab yet"
    _with_lab(client, user)
    response = _create(client, user, workers=2, max_workers=4)
    assert response.status_code == 201, response.get_data(as_text=True)
    created = response.get_json()
    name, namespace = created["name"], created["namespace"]
    assert (created["status"], created["owner"], namespace) == (
        "starting",
        user.username,
        f"nublado-{user.username}",
    )
    assert created["usage"] == {
        "clusters": 1,
        "workers": 2,
        "cpu": 1.5,
        "memory": 3 * 2**30,
        "gpus": 0,
    }
    running = _running(client, user, name)
    assert running["scheduler_address"] == f"tcp://{name}-scheduler.{namespace}:8786"
    obj = kube.store.get("daskclusters", namespace, name)
    assert obj is not None and obj["spec"]["worker"]["replicas"] == 2
    assert obj["metadata"]["labels"]["lab-spawner.jupyter.org/user"] == user.username
    workers = [
        p
        for p in kube.store.list("pods", namespace)
        if p["metadata"]["labels"].get("dask.org/component") == "worker"
    ]
    assert len(workers) == 2
    assert workers[0]["spec"]["securityContext"]["runAsUser"] == user.uid

    listed = client.get(f"/spawner/v1/labs/{user.username}/clusters", headers=user.headers)
    assert [c["name"] for c in listed.get_json()] == [name]
    assert (
        client.get(
            f"/spawner/v1/labs/{user.username}/clusters/{name}", headers=admin_headers
        ).status_code
        == 200
    )
    other = new_user()
    forbidden = client.get(f"/spawner/v1/labs/{user.username}/clusters", headers=other.headers)
    assert forbidden.status_code == 403

    deleted = client.delete(
        f"/spawner/v1/labs/{user.username}/clusters/{name}", headers=user.headers
    )
    assert deleted.status_code == 202 and deleted.get_json()["status"] == "terminating"

    def gone() -> bool:
        answer = client.get(
            f"/spawner/v1/labs/{user.username}/clusters/{name}", headers=user.headers
        )
        return answer.status_code == 404

    wait_for(gone)
    assert kube.store.get("daskclusters", namespace, name) is None
    wait_for(
        lambda: not [p for p in kube.store.list("pods", namespace) if name in p["metadata"]["name"]]
    )


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"kind": "sparkjobs"}, "kind", "unknown kind 'sparkjobs'"),
        ({"worker_tier": "huge"}, "worker_tier", "unknown tier 'huge'; tiers are: small, gpu"),
        ({"head_tier": "gpu"}, "head_tier", "tier gpu is only for rayclusters"),
        ({"workers": 3, "max_workers": 2}, "max_workers", "must not be less than workers"),
        ({"workers": 1, "max_workers": 11}, "max_workers", "must not exceed 10"),
        ({"workers": -1}, "workers", "Must be greater than or equal to 0"),
        ({"image": "registry.test/nowhere:1"}, "image", "nowhere"),
    ],
)
def test_a_bad_request_is_refused_naming_its_field(
    client: FlaskClient,
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
    body: dict[str, Any],
    field: str,
    message: str,
) -> None:
    user = new_user()
    _with_lab(client, user)
    response = _create(client, user, **body)
    assert response.status_code == 422, response.get_data(as_text=True)
    error = response.get_json()
    assert error["field"] == field and message in error["message"], error
    namespace = f"nublado-{user.username}"
    assert kube.store.list("daskclusters", namespace) == []


def test_a_request_past_the_budget_is_refused_whole(
    client: FlaskClient, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    user = new_user(groups=(GroupSpec("plain", 4242),))
    _with_lab(client, user)
    first = _create(client, user, workers=2)
    assert first.status_code == 201
    _running(client, user, first.get_json()["name"])
    second = _create(client, user, workers=1)
    assert second.status_code == 409
    error = second.get_json()
    assert error["code"] == "quota_exceeded"
    assert error["message"].startswith("the clusters budget would be passed: 2 in all, 1 allowed")
    assert len(kube.store.list("daskclusters", f"nublado-{user.username}")) == 1
    # A group's budget is larger.
    scientist = new_user()
    _with_lab(client, scientist)
    for _ in range(2):
        created = _create(client, scientist, workers=2)
        assert created.status_code == 201
        _running(client, scientist, created.get_json()["name"])
    too_many = _create(client, scientist, workers=5)
    assert too_many.status_code == 409
    assert "workers budget" in too_many.get_json()["message"]

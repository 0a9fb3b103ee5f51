"""The cluster routes end to end, against the emulated cluster and its simulated operators:
creation beside a running lab, the checks a request passes first, budgets, ownership, and
deletion."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.engine.kind import StepFailed
from app.extensions.labs import machinery_of
from app.workloads.cluster.adapters import ADAPTERS, ClusterShape, PodShape
from app.workloads.cluster.kind import create_or_adopt
from app.workloads.cluster.records import custom_kind
from devstack.gafaelfawr import GroupSpec
from devstack.kube import KubernetesEmulator
from devstack.kube.quantities import parse_quantity
from tests.clusters.conftest import create, running, with_lab
from tests.labs.conftest import LabUser, read_events, wait_for


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
    with_lab(client, user)
    created = create(client, user, kind=kind, workers=2, max_workers=3)
    assert created.status_code == 201, created.get_data(as_text=True)
    name, namespace = created.get_json()["name"], created.get_json()["namespace"]
    ready = running(client, user, name)
    assert ready["scheduler_address"] == address.format(name=name, namespace=namespace)
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
    with_lab(client, user)
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


def test_a_lab_without_clusters_is_deleted_without_a_call_for_them(
    client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    """The operators' kinds are served here, but a user with no cluster record costs its
    lab's delete no call for them: only a user with clusters has them deleted first."""
    user = new_user()
    with_lab(client, user)
    namespace = f"nublado-{user.username}"
    response = client.delete(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
    assert response.status_code == 202
    assert read_events(client, user.username, user.headers)[-1].type == "complete"
    assert kube.audit.entries(verb="delete", resource="namespaces", name=namespace)
    assert kube.audit.entries(verb="deletecollection", namespace=namespace) == []


def test_a_cluster_runs_beside_the_lab_and_goes_on_delete(
    client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    user = new_user()
    assert create(client, user).status_code == 409, "no running lab yet"
    with_lab(client, user)
    response = create(client, user, workers=2, max_workers=4)
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
        "kernels": 0,
        "cpu": 1.5,
        "memory": 3 * 2**30,
        "gpus": 0,
    }
    ready = running(client, user, name)
    assert ready["scheduler_address"] == f"tcp://{name}-scheduler.{namespace}:8786"
    obj = kube.store.get("daskclusters", namespace, name)
    assert obj is not None and obj["spec"]["worker"]["replicas"] == 2
    assert obj["metadata"]["labels"]["lab-spawner.jupyter.org/user"] == user.username

    def worker_pods() -> list[dict[str, Any]]:
        return [
            p
            for p in kube.store.list("pods", namespace)
            if p["metadata"]["labels"].get("dask.org/component") == "worker"
        ]

    # The operator makes the workers' Deployments once the worker group exists; a running
    # cluster is one whose scheduler is ready, and its workers follow.
    workers = wait_for(lambda: worker_pods() if len(worker_pods()) == 2 else None)
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
        (
            {"worker_tier": "huge"},
            "worker_tier",
            "unknown tier 'huge'; tiers are: small, large, elsewhere, gpu",
        ),
        ({"head_tier": "gpu"}, "head_tier", "tier gpu is only for rayclusters"),
        ({"workers": 1.5}, "workers", "Not a valid integer"),
        ({"workers": 2, "max_workers": 3.0}, "max_workers", "Not a valid integer"),
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
    with_lab(client, user)
    response = create(client, user, **body)
    assert response.status_code == 422, response.get_data(as_text=True)
    error = response.get_json()
    assert error["field"] == field and message in error["message"], error
    namespace = f"nublado-{user.username}"
    assert kube.store.list("daskclusters", namespace) == []


def test_a_request_past_the_budget_is_refused_whole(
    client: FlaskClient, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    user = new_user(groups=(GroupSpec("plain", 4242),))
    with_lab(client, user)
    first = create(client, user, workers=2)
    assert first.status_code == 201
    running(client, user, first.get_json()["name"])
    second = create(client, user, workers=1)
    assert second.status_code == 409
    error = second.get_json()
    assert error["code"] == "quota_exceeded"
    assert error["message"].startswith("the clusters budget would be passed: 2 in all, 1 allowed")
    assert len(kube.store.list("daskclusters", f"nublado-{user.username}")) == 1
    # A group's budget is larger.
    scientist = new_user()
    with_lab(client, scientist)
    for _ in range(2):
        created = create(client, scientist, workers=2)
        assert created.status_code == 201
        running(client, scientist, created.get_json()["name"])
    too_many = create(client, scientist, workers=5)
    assert too_many.status_code == 409
    assert "workers budget" in too_many.get_json()["message"]


def test_an_administrator_creates_for_a_user_within_the_users_budget(
    client: FlaskClient,
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
    admin_headers: dict[str, str],
) -> None:
    # The default budget: one cluster, three workers.
    user, labless = new_user(groups=(GroupSpec("plain", 4242),)), new_user()
    body = {"kind": "daskclusters", "workers": 2, "max_workers": 5}
    refused = client.post(
        f"/spawner/v1/labs/{labless.username}/clusters", json=body, headers=admin_headers
    )
    assert (refused.status_code, refused.get_json()["code"]) == (409, "conflict")

    with_lab(client, user)
    created = client.post(
        f"/spawner/v1/labs/{user.username}/clusters", json=body, headers=admin_headers
    )
    assert created.status_code == 201, created.get_data(as_text=True)
    cluster = created.get_json()
    assert (cluster["owner"], cluster["namespace"]) == (user.username, f"nublado-{user.username}")
    # The user reads it as their own, and it runs as them.
    assert running(client, user, cluster["name"])["status"] == "running"
    obj = kube.store.get("daskclusters", cluster["namespace"], cluster["name"])
    assert obj is not None
    context = obj["spec"]["worker"]["spec"]["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"]) == (user.uid, user.gid)

    again = client.post(
        f"/spawner/v1/labs/{user.username}/clusters", json=body, headers=admin_headers
    )
    assert (again.status_code, again.get_json()["code"]) == (409, "quota_exceeded")
    scale = f"/ddl_cluster_scaler/scale/daskclusters/{cluster['name']}"
    past = client.patch(scale, json={"replicas": 4}, headers=admin_headers)
    assert (past.status_code, past.get_json()["code"]) == (409, "quota_exceeded")
    assert client.patch(scale, json={"replicas": 3}, headers=admin_headers).status_code == 200


def test_the_lab_namespace_quota_holds_the_clusters_and_gives_their_room_back(
    client: FlaskClient, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    """The lab namespace's ResourceQuota admits exactly the lab and the user's clusters: it
    grows before a cluster's pods are made or scaled up, and shrinks when they go."""
    user = new_user()
    with_lab(client, user)
    namespace = f"nublado-{user.username}"

    def hard() -> dict[str, Decimal]:
        quota = kube.store.get("resourcequotas", namespace, f"nb-{user.username}-quota")
        assert quota is not None
        return {k: parse_quantity(v) for k, v in quota["spec"]["hard"].items()}

    lab = hard()
    # The small tier: 500m requested, 1 core limit, 1 GiB, for the head and each worker.
    created = create(client, user, workers=2, max_workers=3)
    assert created.status_code == 201
    name = created.get_json()["name"]
    running(client, user, name)
    assert hard()["requests.cpu"] == lab["requests.cpu"] + Decimal("1.5")
    assert hard()["limits.cpu"] == lab["limits.cpu"] + 3
    assert hard()["limits.memory"] == lab["limits.memory"] + 3 * 2**30

    scaled = client.patch(
        f"/ddl_cluster_scaler/scale/daskclusters/{name}", json={"replicas": 3}, headers=user.headers
    )
    assert scaled.status_code == 200
    assert hard()["requests.cpu"] == lab["requests.cpu"] + 2

    def workers() -> int:
        return len(
            [
                p
                for p in kube.store.list("pods", namespace)
                if p["metadata"]["labels"].get("dask.org/component") == "worker"
            ]
        )

    # Every pod the operator makes is admitted: none is refused by the quota.
    wait_for(lambda: workers() == 3)
    assert not [e for e in kube.store.list("events", namespace) if e["reason"] == "FailedCreate"]

    deleted = client.delete(
        f"/spawner/v1/labs/{user.username}/clusters/{name}", headers=user.headers
    )
    assert deleted.status_code == 202
    wait_for(lambda: hard() == lab)

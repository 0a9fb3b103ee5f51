"""The cluster scaler API: routes, bodies, answers and error codes of its design, with
Gafaelfawr deciding who the caller is, tiers from the configuration, and budgets."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from kubernetes import client as k8s

from app.config import Config, parse_config
from devstack.gafaelfawr import GroupSpec
from devstack.kube import KubernetesEmulator
from tests.clusters.conftest import create, running, running_cluster, with_lab
from tests.labs.conftest import LabUser, wait_for


def _scale(client: FlaskClient, who: dict[str, str], name: str, body: Any) -> Any:
    return client.patch(f"/ddl_cluster_scaler/scale/daskclusters/{name}", json=body, headers=who)


def test_list_and_read_show_an_owner_their_clusters_and_an_administrator_all(
    client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    owner, other = new_user(), new_user()
    name = running_cluster(client, owner)["name"]
    own = client.get("/ddl_cluster_scaler/list/daskclusters", headers=owner.headers).get_json()
    assert own["kind"] == "daskclusters" and own["count"] == len(own["clusters"]) == 1
    assert own["clusters"][0]["metadata"]["name"] == name
    theirs = client.get("/ddl_cluster_scaler/list/daskclusters", headers=other.headers).get_json()
    assert name not in [c["metadata"]["name"] for c in theirs["clusters"]]
    everything = client.get("/ddl_cluster_scaler/list/daskclusters", headers=admin_headers)
    assert name in [c["metadata"]["name"] for c in everything.get_json()["clusters"]]

    read = client.get(f"/ddl_cluster_scaler/cluster/daskclusters/{name}", headers=owner.headers)
    assert read.status_code == 200 and read.get_json()["kind"] == "DaskCluster"
    denied = client.get(f"/ddl_cluster_scaler/cluster/daskclusters/{name}", headers=other.headers)
    assert (denied.status_code, denied.get_json()["code"]) == (403, "unauthorized")
    bad_kind = client.get("/ddl_cluster_scaler/list/mpiclusters", headers=owner.headers)
    assert (bad_kind.status_code, bad_kind.get_json()["code"]) == (400, "invalid_kind")
    # Only an administrator learns that a name is nobody's cluster: anyone else is refused
    # as for another user's, so names are not given away.
    missing = client.get("/ddl_cluster_scaler/cluster/daskclusters/nope", headers=owner.headers)
    assert (missing.status_code, missing.get_json()["code"]) == (403, "unauthorized")
    missing = client.get("/ddl_cluster_scaler/cluster/daskclusters/nope", headers=admin_headers)
    assert (missing.status_code, missing.get_json()["code"]) == (404, "not_found")
    # Whose the cluster is is settled before the body is looked at.
    probe = client.patch(
        f"/ddl_cluster_scaler/scale/daskclusters/{name}",
        json={"replicas": "many"},
        headers=other.headers,
    )
    assert (probe.status_code, probe.get_json()["code"]) == (403, "unauthorized")


def test_scale_caps_at_the_maximum_takes_a_tier_and_the_operator_follows(
    client: FlaskClient, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    owner = new_user()
    cluster = running_cluster(client, owner, workers=1, max_workers=3)
    name, namespace = cluster["name"], cluster["namespace"]

    scaled = _scale(client, owner.headers, name, {"replicas": 5})
    assert scaled.status_code == 200, scaled.get_data(as_text=True)
    assert scaled.get_json() == {
        "kind": "daskclusters",
        "name": name,
        "requested_replicas": 5,
        "effective_replicas": 3,
        "maxReplicas": 3,
        "capped": True,
    }
    obj = kube.store.get("daskclusters", namespace, name)
    assert obj is not None and obj["spec"]["worker"]["replicas"] == 3

    def workers() -> int:
        pods = kube.store.list("pods", namespace)
        return len(
            [p for p in pods if p["metadata"]["labels"].get("dask.org/component") == "worker"]
        )

    wait_for(lambda: workers() == 3)
    record = client.get(f"/spawner/v1/labs/{owner.username}/clusters/{name}", headers=owner.headers)
    assert record.get_json()["workers"] == 3 and record.get_json()["usage"]["workers"] == 3

    tiered = _scale(client, owner.headers, name, {"replicas": 1, "worker_hw_tier_name": "large"})
    assert tiered.status_code == 200
    assert tiered.get_json()["worker_hw_tier_id"]["name"] == "large"
    # The operator's worker group takes the count and the tier for the workers it makes next.
    # (Retiring a worker needs a scheduler that answers: the operator asks it which worker
    # to close. Emulated pods run no scheduler; test_real_dask_operator follows a scale-down
    # on the stack whose pods are real Dask processes.)

    def group_follows() -> bool:
        group = kube.store.get("daskworkergroups", namespace, f"{name}-default") or {}
        worker = (group.get("spec") or {}).get("worker") or {}
        resources = worker["spec"]["containers"][0]["resources"]
        return bool(worker.get("replicas") == 1 and resources["requests"]["cpu"] == "1")

    wait_for(group_follows)


def test_a_cluster_just_created_is_read_and_scaled_as_soon_as_it_runs(
    client: FlaskClient, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    """A notebook creates a cluster and scales it at once: the scaler's routes wait for the
    creation to end rather than answering 404 or 409 for a cluster they just made."""
    owner = new_user()
    with_lab(client, owner)
    created = create(client, owner, workers=1, max_workers=3)
    assert created.status_code == 201, created.get_data(as_text=True)
    name, namespace = created.get_json()["name"], created.get_json()["namespace"]

    read = client.get(f"/ddl_cluster_scaler/cluster/daskclusters/{name}", headers=owner.headers)
    assert read.status_code == 200, read.get_data(as_text=True)
    assert read.get_json()["metadata"]["name"] == name
    scaled = _scale(client, owner.headers, name, {"replicas": 2})
    assert scaled.status_code == 200, scaled.get_data(as_text=True)
    assert scaled.get_json()["effective_replicas"] == 2
    obj = kube.store.get("daskclusters", namespace, name)
    assert obj is not None and obj["spec"]["worker"]["replicas"] == 2
    record = client.get(f"/spawner/v1/labs/{owner.username}/clusters/{name}", headers=owner.headers)
    assert (record.get_json()["status"], record.get_json()["workers"]) == ("running", 2)


def test_scale_refuses_what_its_design_refuses(
    client: FlaskClient, new_user: Callable[..., LabUser]
) -> None:
    owner, other = new_user(groups=(GroupSpec("plain", 4343),)), new_user()
    name = running_cluster(client, owner, workers=1, max_workers=10)["name"]
    for body, status, code in (
        ({"replicas": "two"}, 400, "bad_request"),
        ({"replicas": -1}, 400, "bad_request"),
        ({"replicas": 1, "worker_hw_tier_name": "huge"}, 400, "invalid_hw_tier"),
        ({"replicas": 1, "worker_hw_tier_name": "gpu"}, 400, "invalid_hw_tier"),
        # The default budget allows 3 workers in all.
        ({"replicas": 4}, 409, "quota_exceeded"),
    ):
        answer = _scale(client, owner.headers, name, body)
        assert (answer.status_code, answer.get_json()["code"]) == (status, code), body
    denied = _scale(client, other.headers, name, {"replicas": 1})
    assert (denied.status_code, denied.get_json()["code"]) == (403, "unauthorized")
    assert _scale(client, owner.headers, name, {"replicas": 3}).status_code == 200
    # A field the design does not name is ignored; a body that is no JSON object is its 400.
    ignored = _scale(client, owner.headers, name, {"replicas": 2, "colour": "blue"})
    assert (ignored.status_code, ignored.get_json()["effective_replicas"]) == (200, 2)
    not_json = client.patch(
        f"/ddl_cluster_scaler/scale/daskclusters/{name}",
        data="two",
        headers={**owner.headers, "Content-Type": "application/json"},
    )
    assert (not_json.status_code, not_json.get_json()["code"]) == (400, "bad_request")
    assert "JSON object" in not_json.get_json()["message"]


@pytest.mark.parametrize(
    ("kind", "resource", "pointer"),
    [
        ("rayclusters", "rayclusters", ("workerGroupSpecs", 0, "replicas")),
        ("sparkclusters", "sparkconnects", ("executor", "instances")),
    ],
)
def test_every_kind_scales_where_its_operator_keeps_the_count(
    client: FlaskClient,
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
    kind: str,
    resource: str,
    pointer: tuple[Any, ...],
) -> None:
    owner = new_user()
    cluster = running_cluster(client, owner, kind=kind, workers=1, max_workers=2)
    answer = client.patch(
        f"/ddl_cluster_scaler/scale/{kind}/{cluster['name']}",
        json={"replicas": 2},
        headers=owner.headers,
    )
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.get_json()["effective_replicas"] == 2
    value: Any = (kube.store.get(resource, cluster["namespace"], cluster["name"]) or {})["spec"]
    for step in pointer:
        value = value[step]
    assert value == 2


def _head(kube: KubernetesEmulator, namespace: str, name: str) -> list[dict[str, Any]]:
    """The cluster's live head pods, as the dask operator labels them."""
    return [
        p
        for p in kube.store.list("pods", namespace)
        if p["metadata"]["labels"].get("dask.org/cluster-name") == name
        and p["metadata"]["labels"].get("dask.org/component") == "scheduler"
        and not p["metadata"].get("deletionTimestamp")
    ]


def test_a_new_head_tier_is_taken_by_the_head_a_restart_makes(
    client: FlaskClient, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    owner = new_user()
    cluster = running_cluster(client, owner)
    name, namespace = cluster["name"], cluster["namespace"]
    base = "/ddl_cluster_scaler"
    before = cluster["usage"]["cpu"]

    tiered = client.patch(
        f"{base}/head-hw-tier/daskclusters/{name}",
        json={"head_hw_tier_name": "large"},
        headers=owner.headers,
    )
    assert tiered.status_code == 200, tiered.get_data(as_text=True)
    body = tiered.get_json()
    assert (body["kind"], body["name"], body["head_hw_tier_name"]) == (
        "daskclusters",
        name,
        "large",
    )
    scheduler = body["object"]["spec"]["scheduler"]
    assert scheduler["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"
    assert scheduler["metadata"]["labels"]["lab-spawner.jupyter.org/hardware-tier-id"] == "large"
    record = client.get(f"/spawner/v1/labs/{owner.username}/clusters/{name}", headers=owner.headers)
    assert record.get_json()["head_tier"] == "large"
    assert record.get_json()["usage"]["cpu"] == pytest.approx(before + 0.5)
    # The running head keeps what it was made with until it is made again.
    (old,) = _head(kube, namespace, name)
    assert old["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"

    restart = client.patch(f"{base}/restart_head/daskclusters/{name}", headers=owner.headers)
    assert restart.status_code == 202, restart.get_data(as_text=True)
    restarted = restart.get_json()
    assert restarted["ok"] is True and restarted["grace_period_seconds"] == 20
    assert (restarted["namespace"], restarted["pod"]) == (namespace, old["metadata"]["name"])
    assert restarted["k8s_response"]["uid"] == old["metadata"]["uid"]

    def status() -> dict[str, Any] | None:
        answer = client.get(
            f"{base}/restart_head_status/daskclusters/{name}",
            query_string={"started_at": restarted["started_at"]},
            headers=owner.headers,
        )
        assert answer.status_code == 200, answer.get_data(as_text=True)
        data: dict[str, Any] = answer.get_json()
        assert data["evaluated_with"] == "started_at"
        return data if data["ok"] else None

    done: dict[str, Any] = wait_for(status)
    assert (done["status"], done["restarted"], done["ready"]) == ("restarted_and_ready", True, True)
    assert done["pod"] != old["metadata"]["name"]
    (new,) = _head(kube, namespace, name)
    assert new["metadata"]["name"] == done["pod"]
    assert new["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"

    # Against a time after the restart, the same head was not restarted.
    later = client.get(
        f"{base}/restart_head_status/daskclusters/{name}",
        query_string={"started_at": "2999-01-01T00:00:00Z"},
        headers=owner.headers,
    ).get_json()
    assert (later["ok"], later["restarted"], later["status"]) == (False, False, "not_restarted")
    assert running(client, owner, name)["status"] == "running"


def test_head_routes_refuse_what_their_design_refuses(
    client: FlaskClient,
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
    admin_headers: dict[str, str],
) -> None:
    owner, other = new_user(), new_user()
    cluster = running_cluster(client, owner)
    name, namespace = cluster["name"], cluster["namespace"]
    base = "/ddl_cluster_scaler"
    for body, status, code in (
        ({}, 400, "bad_request"),
        ({"head_hw_tier_name": 3}, 400, "bad_request"),
        ({"head_hw_tier_name": "huge"}, 400, "invalid_hw_tier"),
        ({"head_hw_tier_name": "gpu"}, 400, "invalid_hw_tier"),
    ):
        answer = client.patch(
            f"{base}/head-hw-tier/daskclusters/{name}", json=body, headers=owner.headers
        )
        assert (answer.status_code, answer.get_json()["code"]) == (status, code), body
    for method, path in (
        ("PATCH", f"head-hw-tier/daskclusters/{name}"),
        ("PATCH", f"restart_head/daskclusters/{name}"),
        ("GET", f"restart_head_status/daskclusters/{name}?started_at=2026-01-01T00:00:00Z"),
    ):
        denied = client.open(
            f"{base}/{path}",
            method=method,
            json={"head_hw_tier_name": "small"},
            headers=other.headers,
        )
        assert (denied.status_code, denied.get_json()["code"]) == (403, "unauthorized"), path
        wrong_kind = client.open(
            f"{base}/{path.replace('daskclusters', 'mpiclusters')}",
            method=method,
            json={"head_hw_tier_name": "small"},
            headers=owner.headers,
        )
        assert (wrong_kind.status_code, wrong_kind.get_json()["code"]) == (400, "invalid_kind")
        missing = client.open(
            f"{base}/{path.replace(name, 'nope')}",
            method=method,
            json={"head_hw_tier_name": "small"},
            headers=admin_headers,
        )
        assert (missing.status_code, missing.get_json()["code"]) == (404, "not_found")
    for query in ({}, {"started_at": "yesterday"}):
        answer = client.get(
            f"{base}/restart_head_status/daskclusters/{name}",
            query_string=query,
            headers=owner.headers,
        )
        assert (answer.status_code, answer.get_json()["code"]) == (400, "bad_request"), query
    # An administrator may act on anyone's cluster.
    status = client.get(
        f"{base}/restart_head_status/daskclusters/{name}",
        query_string={"started_at": "2026-01-01T00:00:00Z"},
        headers=admin_headers,
    )
    assert status.status_code == 200 and status.get_json()["ready"] is True

    # With its object deleted behind the service's back, the cluster has no head.
    api = kube.api_client()
    try:
        k8s.CustomObjectsApi(api).delete_namespaced_custom_object(
            "kubernetes.dask.org", "v1", namespace, "daskclusters", name
        )
    finally:
        api.close()
    wait_for(lambda: not _head(kube, namespace, name))
    for method, path in (
        ("PATCH", f"restart_head/daskclusters/{name}"),
        ("GET", f"restart_head_status/daskclusters/{name}?started_at=2026-01-01T00:00:00Z"),
    ):
        gone = client.open(f"{base}/{path}", method=method, headers=owner.headers)
        assert (gone.status_code, gone.get_json()["code"]) == (404, "head_pod_not_found"), path


def test_a_cluster_that_is_not_running_is_neither_scaled_nor_retiered(
    client: FlaskClient, new_user: Callable[..., LabUser]
) -> None:
    owner = new_user()
    with_lab(client, owner)
    created = create(client, owner, head_tier="elsewhere")
    assert created.status_code == 201, created.get_data(as_text=True)
    name = created.get_json()["name"]

    def failed() -> dict[str, Any] | None:
        body: dict[str, Any] = client.get(
            f"/spawner/v1/labs/{owner.username}/clusters/{name}", headers=owner.headers
        ).get_json()
        return body if body["status"] == "failed" else None

    # Its head can run on no node: the creation fails fast, and the object stays.
    assert "node" in wait_for(failed)["error"]
    scaled = _scale(client, owner.headers, name, {"replicas": 1})
    assert (scaled.status_code, scaled.get_json()["code"]) == (409, "not_scalable")
    tiered = client.patch(
        f"/ddl_cluster_scaler/head-hw-tier/daskclusters/{name}",
        json={"head_hw_tier_name": "small"},
        headers=owner.headers,
    )
    assert (tiered.status_code, tiered.get_json()["code"]) == (409, "not_supported")


@pytest.fixture
def limited_client(
    cluster_config: dict[str, Any], make_app: Callable[[Config], Flask]
) -> FlaskClient:
    raw = copy.deepcopy(cluster_config)
    raw["limits"] = {"mutationsPerMinute": 4}
    return make_app(parse_config(raw)).test_client()


def test_scaler_changes_are_the_owners_changes_capped_per_minute(
    limited_client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    """Scales are changes of the owner's clusters, capped as their creations are; refusals
    (a bad body) are given back, and an administrator is never refused for what the owner
    sent."""
    owner = new_user()
    name = running_cluster(limited_client, owner, workers=1, max_workers=3)["name"]  # one change
    for _ in range(10):
        bad = _scale(limited_client, owner.headers, name, {"replicas": "many"})
        assert (bad.status_code, bad.get_json()["code"]) == (400, "bad_request")
    for replicas in (2, 3, 1):
        scaled = _scale(limited_client, owner.headers, name, {"replicas": replicas})
        assert scaled.status_code == 200, scaled.get_json()
    refused = _scale(limited_client, owner.headers, name, {"replicas": 2})
    assert (refused.status_code, refused.get_json()["code"]) == (429, "too_many_requests")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    for path in (f"head-hw-tier/daskclusters/{name}", f"restart_head/daskclusters/{name}"):
        body = {"head_hw_tier_name": "small"}
        capped = limited_client.patch(
            f"/ddl_cluster_scaler/{path}", json=body, headers=owner.headers
        )
        assert capped.status_code == 429, path
    assert _scale(limited_client, admin_headers, name, {"replicas": 2}).status_code == 200

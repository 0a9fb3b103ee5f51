"""The cluster scaler API: routes, bodies, answers and error codes of its design, with
Gafaelfawr deciding who the caller is, tiers from the configuration, and budgets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient

from devstack.gafaelfawr import GroupSpec
from devstack.kube import KubernetesEmulator
from tests.clusters.conftest import create, running, with_lab
from tests.labs.conftest import LabUser, wait_for


def _cluster(client: FlaskClient, user: LabUser, **body: Any) -> dict[str, Any]:
    """A running cluster of the user's (a Dask one unless ``kind`` says), beside a lab."""
    with_lab(client, user)
    created = create(client, user, **body)
    assert created.status_code == 201, created.get_data(as_text=True)
    return running(client, user, created.get_json()["name"])


def _scale(client: FlaskClient, who: dict[str, str], name: str, body: Any) -> Any:
    return client.patch(f"/ddl_cluster_scaler/scale/daskclusters/{name}", json=body, headers=who)


def test_list_and_read_show_an_owner_their_clusters_and_an_administrator_all(
    client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    owner, other = new_user(), new_user()
    name = _cluster(client, owner)["name"]
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
    missing = client.get("/ddl_cluster_scaler/cluster/daskclusters/nope", headers=owner.headers)
    assert missing.status_code == 404


def test_scale_caps_at_the_maximum_takes_a_tier_and_the_operator_follows(
    client: FlaskClient, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    owner = new_user()
    cluster = _cluster(client, owner, workers=1, max_workers=3)
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

    tiered = _scale(client, owner.headers, name, {"replicas": 1, "worker_hw_tier_name": "small"})
    assert tiered.status_code == 200
    assert tiered.get_json()["worker_hw_tier_id"]["name"] == "small"
    wait_for(lambda: workers() == 1)


def test_scale_refuses_what_its_design_refuses(
    client: FlaskClient, new_user: Callable[..., LabUser]
) -> None:
    owner, other = new_user(groups=(GroupSpec("plain", 4343),)), new_user()
    name = _cluster(client, owner, workers=1, max_workers=10)["name"]
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
    cluster = _cluster(client, owner, kind=kind, workers=1, max_workers=2)
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

"""Administrators' actions: maintenance mode, a reconcile now, the provisioned flag reset and
a stuck lab force-deleted; each one in the audit log, and each refused to a user's token."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.extensions.labs import machinery_of
from devstack.kube import KubernetesEmulator
from tests.labs.conftest import LabUser, MakeApp, spawn_body, wait_for
from tests.labs.test_recovery import NEVER, leading, spawn_running, status_of

ADMIN_NAME = "jupyterhub"
"""The user the demo administrator token belongs to."""

ACTIONS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("PUT", "/spawner/v1/admin/maintenance", {"message": "upgrading storage"}),
    ("DELETE", "/spawner/v1/admin/maintenance", None),
    ("POST", "/spawner/v1/admin/reconcile", None),
    ("DELETE", "/spawner/v1/admin/labs/someone/provisioned", None),
    ("POST", "/spawner/v1/admin/labs/someone/force-delete", None),
]


def audit(client: FlaskClient, headers: dict[str, str], limit: int = 100) -> list[dict[str, Any]]:
    response = client.get(f"/spawner/v1/admin/audit?limit={limit}", headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    entries: list[dict[str, Any]] = response.get_json()
    return entries


def test_a_users_token_may_take_no_admin_action_and_leaves_no_entry(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    user = new_user()
    for method, path, body in ACTIONS:
        response = lab_client.open(path, method=method, json=body, headers=user.headers)
        assert response.status_code == 403, (method, path)
        assert response.get_json()["code"] == "permission_denied"
    for path in ("/spawner/v1/admin/audit", "/spawner/v1/admin/maintenance"):
        assert lab_client.get(path, headers=user.headers).status_code == 403
    # Who may act is settled before a body's fields are looked at.
    bad = lab_client.put(
        "/spawner/v1/admin/maintenance", json={"message": ""}, headers=user.headers
    )
    assert (bad.status_code, bad.get_json()["code"]) == (403, "permission_denied")
    assert audit(lab_client, admin_headers) == []
    refused = lab_client.get("/spawner/v1/admin/audit?limit=0", headers=admin_headers)
    assert (refused.status_code, refused.get_json()["field"]) == (422, "limit")
    # A query parameter the route does not name is ignored.
    paged = lab_client.get("/spawner/v1/admin/audit?limit=5&page=2", headers=admin_headers)
    assert (paged.status_code, paged.get_json()) == (200, [])


def test_maintenance_refuses_creations_tells_users_and_probes_and_is_audited(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    user = new_user()
    message = "storage upgrade until 10:00"
    turned_on = lab_client.put(
        "/spawner/v1/admin/maintenance", json={"message": message}, headers=admin_headers
    )
    assert turned_on.status_code == 200
    assert turned_on.get_json()["enabled"] is True
    state = lab_client.get("/spawner/v1/admin/maintenance", headers=admin_headers).get_json()
    assert (state["enabled"], state["message"], state["by"]) == (True, message, ADMIN_NAME)

    refused = lab_client.post(
        f"/spawner/v1/labs/{user.username}/spawn", json=spawn_body(), headers=user.headers
    )
    assert refused.status_code == 503
    assert refused.get_json()["code"] == "maintenance"
    assert message in refused.get_json()["message"]
    assert int(refused.headers["Retry-After"]) > 0
    assert (
        lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers).status_code
        == 404
    )
    form = lab_client.get(f"/spawner/v1/spawn-form/{user.username}", headers=user.headers)
    assert message in form.get_data(as_text=True)
    assert 'name="size"' not in form.get_data(as_text=True)
    assert lab_client.get("/readyz").get_json()["maintenance"] == message

    # Bad input changes nothing.
    empty = lab_client.put(
        "/spawner/v1/admin/maintenance", json={"message": ""}, headers=admin_headers
    )
    assert empty.status_code == 422
    assert (
        lab_client.get("/spawner/v1/admin/maintenance", headers=admin_headers).get_json()["message"]
        == message
    )

    turned_off = lab_client.delete("/spawner/v1/admin/maintenance", headers=admin_headers)
    assert turned_off.get_json()["enabled"] is False
    assert lab_client.get("/readyz").get_json()["maintenance"] is None
    spawned = lab_client.post(
        f"/spawner/v1/labs/{user.username}/spawn", json=spawn_body(), headers=user.headers
    )
    assert spawned.status_code == 303

    entries = audit(lab_client, admin_headers)
    assert [(e["action"], e["outcome"], e["status"]) for e in entries] == [
        ("maintenance.off", "ok", 200),
        ("maintenance.on", "invalid_request", 422),
        ("maintenance.on", "ok", 200),
    ]
    assert {e["actor"] for e in entries} == {ADMIN_NAME}
    assert {e["target"] for e in entries} == {"platform"}
    assert entries[-1]["detail"] == f"on: {message}"
    assert entries[0]["at"] >= entries[1]["at"] >= entries[2]["at"]


def test_a_reconcile_asked_for_runs_in_the_leader_at_once(
    watcher_app: MakeApp, admin_headers: dict[str, str]
) -> None:
    app = watcher_app(reconcileSeconds=NEVER)
    client = app.test_client()
    watcher = leading(app)
    before = watcher.reconciles

    response = client.post("/spawner/v1/admin/reconcile", headers=admin_headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    body = response.get_json()
    assert body["complete"] is True and body["finished"] > 0
    assert watcher.reconciles == before + 1
    (entry,) = audit(client, admin_headers)
    assert (entry["action"], entry["outcome"], entry["status"]) == ("reconcile", "ok", 200)
    assert entry["detail"] == "reconciled: complete"


def test_the_provisioned_flag_is_reset(
    lab_app: Flask, lab_client: FlaskClient, admin_headers: dict[str, str]
) -> None:
    labs = machinery_of(lab_app).context.labs
    labs.mark_provisioned("wile")
    path = "/spawner/v1/admin/labs/wile/provisioned"
    first = lab_client.delete(path, headers=admin_headers).get_json()
    assert (first["username"], first["was_provisioned"]) == ("wile", True)
    assert not labs.is_provisioned("wile")
    assert lab_client.delete(path, headers=admin_headers).get_json()["was_provisioned"] is False
    entries = audit(lab_client, admin_headers)
    assert [(e["action"], e["target"], e["detail"]) for e in entries] == [
        ("provisioned.reset", "wile", "was not provisioned"),
        ("provisioned.reset", "wile", "provisioned flag cleared"),
    ]


@pytest.fixture
def hung_kubelet(kube: KubernetesEmulator) -> Iterator[None]:
    """Pods take their whole grace period (30 s) to go, and their namespace waits for them,
    as on a node that stopped answering."""
    settings = kube.cluster.settings
    before = settings.pod_termination_seconds
    settings.pod_termination_seconds = 600
    yield
    settings.pod_termination_seconds = before


def test_a_lab_stuck_terminating_is_force_deleted(
    lab_app: Flask,
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
    hung_kubelet: None,
) -> None:
    user = new_user()
    spawn_running(lab_client, user)
    namespace, pod = f"nublado-{user.username}", f"nb-{user.username}-lab"
    assert (
        lab_client.delete(f"/spawner/v1/labs/{user.username}", headers=admin_headers).status_code
        == 202
    )
    wait_for(
        lambda: (
            (kube.store.get("pods", namespace, pod) or {})
            .get("metadata", {})
            .get("deletionTimestamp")
        )
    )
    assert status_of(lab_client, user.username, admin_headers)["status"] == "terminating"

    forced = lab_client.post(
        f"/spawner/v1/admin/labs/{user.username}/force-delete", headers=admin_headers
    )
    assert forced.status_code == 202
    assert forced.get_json()["status"] == "terminating"
    # Gone long before the 30 s its pod would otherwise have taken.
    wait_for(lambda: kube.store.get("pods", namespace, pod) is None, timeout=10)
    wait_for(lambda: status_of(lab_client, user.username, admin_headers) == {}, timeout=15)

    missing = lab_client.post("/spawner/v1/admin/labs/nobody/force-delete", headers=admin_headers)
    assert missing.status_code == 404
    entries = audit(lab_client, admin_headers)
    assert [(e["action"], e["target"], e["outcome"], e["status"]) for e in entries] == [
        ("lab.force-delete", "nobody", "not_found", 404),
        ("lab.force-delete", user.username, "ok", 202),
    ]

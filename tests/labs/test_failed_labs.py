"""Failed labs: when each failed, dropping those that failed long ago on an administrator's
request and by the elected watcher after its reconciles, and never a lab its user is
spawning again."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from app.extensions.labs import machinery_of
from devstack.kube import KubernetesEmulator
from tests.labs.conftest import LabUser, MakeApp, read_events, spawn_body, wait_for
from tests.labs.test_admin_actions import audit

FAILED = "/spawner/v1/admin/failed-labs"


def fail_spawn(client: FlaskClient, user: LabUser, kube: KubernetesEmulator) -> None:
    """The user's spawn fails: their pod can be scheduled nowhere."""
    kube.cluster.faults.set("unschedulable", f"nublado-{user.username}/*", "injected by the test")
    try:
        response = client.post(
            f"/spawner/v1/labs/{user.username}/spawn", json=spawn_body(), headers=user.headers
        )
        assert response.status_code == 303
        events = read_events(client, user.username, user.headers)
    finally:
        kube.cluster.faults.clear()
    assert events[-1].type == "failed"


def failed_labs(client: FlaskClient, headers: dict[str, str]) -> dict[str, float]:
    response = client.get(FAILED, headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    return {entry["username"]: entry["failed_at"] for entry in response.get_json()}


def delete_lab(client: FlaskClient, username: str, headers: dict[str, str]) -> None:
    """Delete the lab and wait until it is gone: the shared cluster has room for few."""
    assert client.delete(f"/spawner/v1/labs/{username}", headers=headers).status_code == 202
    wait_for(lambda: status(client, username, headers) == {}, timeout=15)


def status(client: FlaskClient, username: str, headers: dict[str, str]) -> dict[str, Any]:
    response = client.get(f"/spawner/v1/labs/{username}", headers=headers)
    return dict(response.get_json()) if response.status_code == 200 else {}


def test_failed_labs_are_listed_with_when_they_failed_until_spawned_again(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    user = new_user()
    before = time.time()
    fail_spawn(lab_client, user, kube)
    failed_at = failed_labs(lab_client, admin_headers)[user.username]
    assert before - 1 <= failed_at <= time.time()

    # Spawning again clears it; the next failure starts a new age.
    fail_spawn(lab_client, user, kube)
    assert failed_labs(lab_client, admin_headers)[user.username] > failed_at

    spawned = lab_client.post(
        f"/spawner/v1/labs/{user.username}/spawn", json=spawn_body(), headers=user.headers
    )
    assert spawned.status_code == 303
    assert user.username not in failed_labs(lab_client, admin_headers)
    assert read_events(lab_client, user.username, user.headers)[-1].type == "complete"
    assert user.username not in failed_labs(lab_client, admin_headers)
    delete_lab(lab_client, user.username, admin_headers)


def test_an_administrator_drops_labs_that_failed_before_an_age(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    old, again = new_user(), new_user()
    fail_spawn(lab_client, old, kube)
    fail_spawn(lab_client, again, kube)
    assert kube.store.get("namespaces", None, f"nublado-{old.username}") is not None

    # None is that old yet.
    kept = lab_client.delete(f"{FAILED}?older_than_seconds=3600", headers=admin_headers)
    assert kept.status_code == 202
    assert kept.get_json()["dropped"] == []

    # A user spawning again at that moment wins over the drop.
    respawn = lab_client.post(
        f"/spawner/v1/labs/{again.username}/spawn", json=spawn_body(), headers=again.headers
    )
    assert respawn.status_code == 303
    dropped = lab_client.delete(f"{FAILED}?older_than_seconds=0", headers=admin_headers)
    assert dropped.status_code == 202
    body = dropped.get_json()
    names = [entry["username"] for entry in body["dropped"]]
    assert old.username in names and again.username not in names
    assert read_events(lab_client, again.username, again.headers)[-1].type == "complete"
    assert status(lab_client, again.username, admin_headers)["status"] == "running"

    # The dropped lab is deleted as any lab is: its record and its namespace go.
    wait_for(lambda: status(lab_client, old.username, admin_headers) == {}, timeout=15)
    wait_for(
        lambda: kube.store.get("namespaces", None, f"nublado-{old.username}") is None, timeout=15
    )
    assert old.username not in failed_labs(lab_client, admin_headers)

    entries = [e for e in audit(lab_client, admin_headers) if e["action"] == "failed-labs.drop"]
    assert [(e["outcome"], e["status"]) for e in entries] == [("ok", 202), ("ok", 202)]
    assert entries[0]["detail"] == f"deleting {len(names)} failed labs older than 0 s"
    delete_lab(lab_client, again.username, admin_headers)


def test_a_bad_age_or_a_users_token_drops_nothing(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    user = new_user()
    fail_spawn(lab_client, user, kube)
    refused = lab_client.delete(f"{FAILED}?older_than_seconds=0", headers=user.headers)
    assert refused.status_code == 403
    assert lab_client.get(FAILED, headers=user.headers).status_code == 403
    for query in ("older_than_seconds=-1", "older_than_seconds=soon"):
        bad = lab_client.delete(f"{FAILED}?{query}", headers=admin_headers)
        assert bad.status_code == 422
        assert bad.get_json()["field"] == "older_than_seconds"
    assert lab_client.get(f"{FAILED}?limit=0", headers=admin_headers).status_code == 422
    assert user.username in failed_labs(lab_client, admin_headers)
    assert status(lab_client, user.username, admin_headers)["status"] == "failed"
    delete_lab(lab_client, user.username, admin_headers)


def with_age(watcher_app: MakeApp, raw: dict[str, Any], age: float) -> Flask:
    """An app dropping labs failed longer than ``age`` ago, whose watcher reconciles (and
    so drops) five times a second."""
    raw = copy.deepcopy(raw)
    raw["admin"] = {"dropFailedLabsAfterSeconds": age}
    return watcher_app(raw, reconcileSeconds=0.2)


def test_the_elected_watcher_drops_labs_failed_longer_than_the_configured_age(
    watcher_app: MakeApp,
    lab_raw_config: dict[str, Any],
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    client = with_age(watcher_app, lab_raw_config, 1).test_client()
    user = new_user()
    fail_spawn(client, user, kube)
    failed_at = failed_labs(client, admin_headers)[user.username]
    wait_for(lambda: status(client, user.username, admin_headers) == {}, timeout=20)
    assert time.time() - failed_at >= 1
    events = read_events(client, user.username, user.headers)
    assert any("Deleting the lab that failed" in e.data for e in events)


def test_without_a_configured_age_a_drop_must_name_one(
    watcher_app: MakeApp,
    lab_raw_config: dict[str, Any],
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    app = with_age(watcher_app, lab_raw_config, 0)
    client = app.test_client()
    user = new_user()
    fail_spawn(client, user, kube)
    watcher = machinery_of(app).watcher
    seen = watcher.reconciles
    wait_for(lambda: watcher.reconciles >= seen + 3)
    assert status(client, user.username, admin_headers)["status"] == "failed"
    refused = client.delete(FAILED, headers=admin_headers)
    assert refused.status_code == 422
    assert "admin.dropFailedLabsAfterSeconds is 0" in refused.get_json()["message"]
    assert status(client, user.username, admin_headers)["status"] == "failed"
    delete_lab(client, user.username, admin_headers)

"""Spawn, status, events and delete through the routes, against the emulated cluster."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from flask import Flask
from flask.testing import FlaskClient
from kubernetes import client as k8s

from app.builders.names import MANAGED_BY, MANAGED_BY_LABEL
from app.config import Config, parse_config
from app.extensions.labs import machinery_of
from app.schemas.labs import LabStatusSchema
from devstack.kube import KubernetesEmulator
from tests.labs.conftest import BAD_IMAGE, IMAGE, LabUser, read_events, spawn_body


def _spawn(client: FlaskClient, user: LabUser, **kwargs: object) -> None:
    response = client.post(
        f"/spawner/v1/labs/{user.username}/spawn",
        json=spawn_body(**kwargs),
        headers=user.headers,  # type: ignore[arg-type]
    )
    assert response.status_code == 303, response.get_data(as_text=True)
    assert response.headers["Location"] == f"/spawner/v1/labs/{user.username}"


def test_spawn_runs_a_lab_and_delete_removes_it(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    user = new_user()
    _spawn(lab_client, user)

    events = read_events(lab_client, user.username, user.headers)
    types = [e.type for e in events]
    assert types[0] == "info"
    assert types[-1] == "complete"
    progress = [int(e.data) for e in events if e.type == "progress"]
    assert progress == sorted(progress) and progress[-1] == 100
    assert any("Started" in e.data or "running" in e.data for e in events if e.type == "info")
    # Every step is announced, in order, whether the pod was ready at the first look (its
    # objects' event then goes with the last ones) or had to be waited for.
    infos = [e.data for e in events if e.type == "info"]
    assert infos[0] == "Lab creation requested"
    assert infos[1].startswith(f"Starting a lab for {user.username} with image ")
    created = infos.index("Lab objects created; waiting for Kubernetes to start the lab")
    assert created < infos.index("The lab is running") == len(infos) - 1
    assert {2, 45, 100} <= set(progress)

    status = lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers).get_json()
    assert status["status"] == "running"
    assert status["pod"] == "present"
    assert status["uid"] == user.uid and status["gid"] == user.gid
    assert status["options"] == {
        "image": "registry.test/lsstsqre/sciplat-lab:w_2024_42",
        "size": "small",
        "debug": False,
        "reset_user_env": False,
        "unvalidated_image": False,
    }
    assert status["env"] == {"JUPYTERHUB_API_URL": "http://hub:8081/hub/api"}
    assert status["quotas"]["limits"] == {"cpu": 1.0, "memory": 4 * 2**30}
    assert status["internal_url"] == f"http://nb-{user.username}-lab.nublado-{user.username}:8888"
    assert user.username in lab_client.get("/spawner/v1/labs", headers=admin_headers).get_json()
    own = lab_client.get("/spawner/v1/user-status", headers=user.headers).get_json()
    assert own == status
    # Served as stored, so the stored shape must be exactly the documented schema's.
    assert LabStatusSchema().load(status) is not None
    assert set(status) == set(LabStatusSchema().fields)

    namespace = f"nublado-{user.username}"
    pod = kube.store.get("pods", namespace, f"nb-{user.username}-lab")
    assert pod is not None and pod["status"]["phase"] == "Running"
    secret = kube.store.get("secrets", namespace, f"nb-{user.username}")
    assert secret is not None
    assert base64.b64decode(secret["data"]["token"]).decode() == user.token

    response = lab_client.delete(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
    assert response.status_code == 202
    events = read_events(lab_client, user.username, user.headers)
    assert events[0].data == "Lab deletion requested"
    assert events[-1].type == "complete"
    assert (
        lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers).status_code
        == 404
    )
    assert kube.store.get("namespaces", None, namespace) is None
    assert kube.store.list("pods", namespace) == []


def test_status_internal_url_follows_the_configured_template(
    lab_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
) -> None:
    template = "https://{username}.labs.example:{port}"
    lab_raw_config["lab"]["internalUrl"] = template
    client = make_app(parse_config(lab_raw_config)).test_client()
    user = new_user()
    _spawn(client, user)
    assert read_events(client, user.username, user.headers)[-1].type == "complete"
    status = client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers).get_json()
    assert status["status"] == "running"
    assert status["internal_url"] == f"https://{user.username}.labs.example:8888"


def test_internal_url_may_name_the_services_cluster_ip(
    lab_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    """A hub that reaches labs by address rather than by DNS name: the URL holds the address
    Kubernetes gave the lab's Service when the spawn created it."""
    lab_raw_config["lab"]["internalUrl"] = "http://{cluster_ip}:{port}"
    client = make_app(parse_config(lab_raw_config)).test_client()
    user = new_user()
    _spawn(client, user)
    assert read_events(client, user.username, user.headers)[-1].type == "complete"
    status = client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers).get_json()
    service = kube.store.get("services", f"nublado-{user.username}", f"nb-{user.username}-lab")
    assert service is not None
    address = service["spec"]["clusterIP"]
    assert address and address != "None"
    assert status["internal_url"] == f"http://{address}:8888"


def test_second_spawn_conflicts(lab_client: FlaskClient, new_user: Callable[..., LabUser]) -> None:
    user = new_user()
    _spawn(lab_client, user)
    response = lab_client.post(
        f"/spawner/v1/labs/{user.username}/spawn", json=spawn_body(), headers=user.headers
    )
    assert response.status_code == 409
    assert response.get_json()["code"] == "conflict"
    assert read_events(lab_client, user.username, user.headers)[-1].type == "complete"


def test_image_pull_failure_fails_fast_and_a_new_spawn_replaces_it(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    user = new_user()
    kube.cluster.faults.set("image_pull", "*:broken@*", "manifest unknown")
    # The broken image is never pulled successfully, so no node has it cached.
    try:
        _spawn(lab_client, user, image=BAD_IMAGE)
        events = read_events(lab_client, user.username, user.headers)
    finally:
        kube.cluster.faults.clear()
    assert events[-1].type == "failed"
    errors = [e.data for e in events if e.type == "error"]
    assert any("cannot pull image" in e and "broken" in e for e in errors)
    status = lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers).get_json()
    assert status["status"] == "failed"
    assert status["pod"] == "present"
    assert "cannot pull image" in status["error"]

    _spawn(lab_client, user)
    events = read_events(lab_client, user.username, user.headers)
    assert events[0].data == "Lab creation requested"
    assert "Removing the pod of the previous lab" in [e.data for e in events]
    assert not any(e.type == "failed" for e in events)
    assert events[-1].type == "complete"
    pod = kube.store.get("pods", f"nublado-{user.username}", f"nb-{user.username}-lab")
    assert pod is not None and pod["spec"]["containers"][0]["image"].startswith(f"{IMAGE}@sha256:")


def test_a_spawn_waits_out_the_previous_namespace_s_termination(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    """The namespace is created first; one of ours still terminating is waited for, then
    made again."""
    user = new_user()
    namespace = f"nublado-{user.username}"
    core = k8s.CoreV1Api(kube.api_client())
    core.create_namespace(
        {"metadata": {"name": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY}}}
    )
    settings = kube.cluster.settings
    termination = settings.namespace_termination_seconds
    settings.namespace_termination_seconds = 0.5
    try:
        core.delete_namespace(namespace)
        _spawn(lab_client, user)
        events = read_events(lab_client, user.username, user.headers)
    finally:
        settings.namespace_termination_seconds = termination
    assert "Waiting for the previous lab's namespace to be removed" in [e.data for e in events]
    assert events[-1].type == "complete"
    current = kube.store.get("namespaces", None, namespace)
    assert current is not None and not current["metadata"].get("deletionTimestamp")
    assert kube.store.get("pods", namespace, f"nb-{user.username}-lab") is not None


def test_event_stream_resumes_after_last_event_id(
    lab_client: FlaskClient, new_user: Callable[..., LabUser]
) -> None:
    user = new_user()
    _spawn(lab_client, user)
    events = read_events(lab_client, user.username, user.headers)
    middle = events[len(events) // 2]
    rest = read_events(lab_client, user.username, user.headers, last_id=middle.id)
    assert rest == events[len(events) // 2 + 1 :]
    # Resuming after the terminal event: nothing more will come, so the stream ends at once.
    assert read_events(lab_client, user.username, user.headers, last_id=events[-1].id) == []
    # An id later than any the stream holds was never sent: refused, not waited on forever.
    millis, _, _ = events[-1].id.partition("-")
    later = f"{int(millis) + 10_000}-0"
    response = lab_client.get(
        f"/spawner/v1/labs/{user.username}/events",
        headers={**user.headers, "Last-Event-ID": later},
    )
    assert response.status_code == 200  # the operation ended: nothing to wait for
    assert response.get_data(as_text=True) == ": stream of lab events\n\n"
    huge = lab_client.get(
        f"/spawner/v1/labs/{user.username}/events",
        headers={**user.headers, "Last-Event-ID": f"{2**64}-0"},
    )
    assert huge.status_code == 422
    assert huge.get_json()["field"] == "Last-Event-ID"


def test_status_reads_never_call_kubernetes(
    lab_app: Flask,
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    user = new_user()
    _spawn(lab_client, user)
    read_events(lab_client, user.username, user.headers)
    # The elected watcher may still be handling the spawn's last pod events, and may read
    # the pod to do so; it is not a status read, so it is stopped before counting.
    machinery_of(lab_app).watcher.stop()
    kube.audit.clear()
    for _ in range(20):
        assert (
            lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers).status_code
            == 200
        )
        assert lab_client.get("/spawner/v1/user-status", headers=user.headers).status_code == 200
        assert lab_client.get("/spawner/v1/labs", headers=admin_headers).status_code == 200
    # Nothing about this lab reached the API server. (The elected watcher's cluster-wide
    # watch and reconcile may run meanwhile; they are not status reads.)
    namespace = f"nublado-{user.username}"
    about_lab = [e for e in kube.audit.entries() if namespace in (e.namespace, e.name)]
    assert about_lab == []

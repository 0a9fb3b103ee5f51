"""Operations across workers: supersession, provisioning, streams served by another worker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from devstack.kube import KubernetesEmulator
from tests.labs.conftest import LabUser, read_events, spawn_body, wait_for
from tests.support.sse import SseEvent, parse_sse


def test_delete_during_spawn_stops_it_and_removes_everything(
    lab_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
    slow_image: Callable[[float], str],
) -> None:
    slow = slow_image(20.0)
    client = make_app(parse_config(lab_raw_config)).test_client()
    user = new_user()
    namespace = f"nublado-{user.username}"
    response = client.post(
        f"/spawner/v1/labs/{user.username}/spawn",
        json=spawn_body(image=slow),
        headers=user.headers,
    )
    assert response.status_code == 303
    wait_for(lambda: kube.store.get("pods", namespace, f"nb-{user.username}-lab"))
    response = client.delete(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
    assert response.status_code == 202
    status = client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
    assert status.get_json()["status"] == "terminating"
    events = read_events(client, user.username, user.headers)
    assert events[0].data == "Lab deletion requested"
    assert events[-1].type == "complete"
    # The superseded spawn wrote nothing into the delete's stream.
    assert not any("Starting a lab" in e.data for e in events)
    assert client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers).status_code == 404
    assert kube.store.get("namespaces", None, namespace) is None


def test_provisioning_runs_on_first_successful_spawn_only(
    lab_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
    fresh_image: str,
) -> None:
    lab_raw_config["lab"]["volumes"] = [{"name": "home", "type": "emptyDir"}]
    lab_raw_config["lab"]["initContainers"] = [
        {
            "name": "provision",
            "image": "registry.test/provisioner:1",
            "privileged": True,
            "volumeMounts": [{"volumeName": "home", "mountPath": "/home"}],
        }
    ]
    client = make_app(parse_config(lab_raw_config)).test_client()
    user = new_user()
    namespace, pod_name = f"nublado-{user.username}", f"nb-{user.username}-lab"

    def spawn_and_pod() -> dict[str, Any]:
        response = client.post(
            f"/spawner/v1/labs/{user.username}/spawn", json=spawn_body(), headers=user.headers
        )
        assert response.status_code == 303
        assert read_events(client, user.username, user.headers)[-1].type == "complete"
        pod = kube.store.get("pods", namespace, pod_name)
        assert pod is not None
        return pod

    def delete() -> None:
        client.delete(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
        assert read_events(client, user.username, user.headers)[-1].type == "complete"

    # A first spawn that fails does not count as provisioned.
    kube.cluster.faults.set("image_pull", f"{fresh_image}*", "injected")
    try:
        client.post(
            f"/spawner/v1/labs/{user.username}/spawn",
            json=spawn_body(image=fresh_image),
            headers=user.headers,
        )
        assert read_events(client, user.username, user.headers)[-1].type == "failed"
        pod = kube.store.get("pods", namespace, pod_name)
        assert pod is not None
        assert [c["name"] for c in pod["spec"]["initContainers"]] == ["provision"]
    finally:
        kube.cluster.faults.clear()
    pod = spawn_and_pod()
    assert [c["name"] for c in pod["spec"].get("initContainers", [])] == ["provision"]
    delete()
    pod = spawn_and_pod()
    assert not pod["spec"].get("initContainers")


def test_second_worker_serves_the_stream_with_keepalives(
    lab_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
    slow_image: Callable[[float], str],
) -> None:
    slow = slow_image(1.5)
    config = parse_config(lab_raw_config)
    first: FlaskClient = make_app(config).test_client()
    second: FlaskClient = make_app(config).test_client()
    user = new_user()
    response = first.post(
        f"/spawner/v1/labs/{user.username}/spawn",
        json=spawn_body(image=slow),
        headers=user.headers,
    )
    assert response.status_code == 303
    stream = second.get(
        f"/spawner/v1/labs/{user.username}/events", headers=user.headers, buffered=False
    )
    items = list(parse_sse(stream.response))  # type: ignore[arg-type]
    stream.close()
    events = [i for i in items if isinstance(i, SseEvent)]
    keepalives = [i for i in items if i == "keepalive"]
    assert events[0].data == "Lab creation requested"
    assert events[-1].type == "complete"
    # keepaliveSeconds is 0.5 in these tests and the pull takes 1.5 s.
    assert keepalives
    ids = [e.id for e in events]
    assert len(set(ids)) == len(ids) and all(ids)


def test_a_spawn_waiting_for_its_pod_lends_its_slot(
    lab_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
    slow_image: Callable[[float], str],
) -> None:
    """With room for one operation at a time, a spawn whose image takes long to pull does
    not hold back another user's spawn: it waits for the kubelet outside its slot."""
    slow = slow_image(60.0)
    lab_raw_config["operations"]["maxConcurrent"] = 1
    client = make_app(parse_config(lab_raw_config)).test_client()
    waiting, other = new_user(), new_user()
    try:
        response = client.post(
            f"/spawner/v1/labs/{waiting.username}/spawn",
            json=spawn_body(image=slow),
            headers=waiting.headers,
        )
        assert response.status_code == 303
        pod = f"nb-{waiting.username}-lab"
        wait_for(lambda: kube.store.get("pods", f"nublado-{waiting.username}", pod))
        response = client.post(
            f"/spawner/v1/labs/{other.username}/spawn", json=spawn_body(), headers=other.headers
        )
        assert response.status_code == 303
        events = read_events(client, other.username, other.headers)
        assert events[-1].type == "complete"
        status = client.get(f"/spawner/v1/labs/{waiting.username}", headers=admin_headers)
        assert status.get_json()["status"] == "starting"
    finally:
        kube.cluster.settings.pull_seconds_by_image.clear()
        client.delete(f"/spawner/v1/labs/{waiting.username}", headers=admin_headers)
        client.delete(f"/spawner/v1/labs/{other.username}", headers=admin_headers)

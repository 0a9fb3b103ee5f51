"""Groups' apps through the HTTP API on the emulated cluster: made from a template, in the
phases of the apps design, updated, stopped, started and deleted; refused whole when a
variable is missing or the group's quota is spent; closed to anyone outside the group."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient

from devstack.kube import KubernetesEmulator
from tests.apps.conftest import APP_IMAGE, app_of, create, in_phase
from tests.labs.conftest import LabUser, wait_for

Member = Callable[[str], LabUser]


def namespace_of(group: str) -> str:
    return f"nublado-apps-{group}"


def app_pods(kube: KubernetesEmulator, group: str, app_id: str) -> list[dict[str, Any]]:
    pods = kube.store.list("pods", namespace_of(group))
    return [
        p
        for p in pods
        if (p["metadata"].get("labels") or {}).get("lab-spawner.jupyter.org/app") == app_id
    ]


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


def test_an_app_is_made_from_its_template_and_becomes_ready(
    client: FlaskClient, kube: KubernetesEmulator, new_group: Callable[[], str], member: Member
) -> None:
    group = new_group()
    user = member(group)
    templates = client.get("/spawner/v1/app-templates", headers=user.headers)
    assert templates.status_code == 200
    dashboard = next(t for t in templates.get_json() if t["name"] == "dashboard")
    assert dashboard["image"] == APP_IMAGE
    assert [v["name"] for v in dashboard["default_envs"]] == ["TITLE", "GREETING"]

    response = create(client, user, group, scope="platform")
    assert response.status_code == 201, response.get_data(as_text=True)
    made = response.get_json()
    app_id = made["id"]
    assert app_id.startswith("dashboard-")
    assert (made["group"], made["phase"], made["scope"]) == (group, "Starting", "platform")
    assert made["url"] == f"https://data.test/apps/{app_id}/"
    ready = in_phase(client, user, app_id, "Ready")
    assert ready["message"] == ""

    namespace = namespace_of(group)
    name = f"app-{app_id}"
    deployment = kube.store.get("deployments", namespace, name)
    assert deployment is not None and deployment["spec"]["replicas"] == 1
    assert kube.store.get("services", namespace, name) is not None
    policy = kube.store.get("networkpolicies", namespace, name)
    assert policy is not None
    ingress = kube.store.get("gafaelfawringresses", namespace, name)
    assert ingress is not None
    assert ingress["config"]["scopes"] == {"any": ["exec:notebook", "read:image"]}
    # Gafaelfawr's operator made the Ingress from it.
    generated = wait_for(lambda: kube.store.get("ingresses", namespace, name))
    (path,) = generated["spec"]["rules"][0]["http"]["paths"]
    assert path["path"] == f"/apps/{app_id}/"
    (pod,) = app_pods(kube, group, app_id)
    env = env_of(pod)
    assert list(env)[:5] == ["APP_ID", "APP_ROOT", "APP_BASE_URL", "PLATFORM_URL", "GROUP"]
    assert (env["APP_ID"], env["GROUP"], env["TITLE"], env["GREETING"]) == (
        app_id,
        group,
        "Results",
        "hello",
    )
    quota = kube.store.get("resourcequotas", namespace, "apps-quota")
    assert quota is not None and quota["spec"]["hard"]["limits.cpu"] == "3"

    listed = client.get(f"/spawner/v1/apps?group={group}", headers=user.headers).get_json()
    assert [a["id"] for a in listed] == [app_id]
    mine = client.get("/spawner/v1/apps", headers=user.headers).get_json()
    assert app_id in [a["id"] for a in mine]


def test_a_request_the_app_cannot_take_creates_nothing(
    client: FlaskClient, kube: KubernetesEmulator, new_group: Callable[[], str], member: Member
) -> None:
    group = new_group()
    user = member(group)
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"env": {}}, 422, "required variables without a value: TITLE"),
        ({"template": "nope"}, 422, "no template nope"),
        ({"size": "huge"}, 422, "no size huge"),
        ({"scope": "everyone"}, 422, "scope"),
        ({"env": {"TITLE": "x", "APP_ID": "mine"}}, 422, "set by the service: APP_ID"),
        ({"env": {"TITLE": "x", "X" * 129: "x"}}, 422, "must be an environment variable name"),
        (
            {"env": {"TITLE": "x", **{f"V{i}": "x" for i in range(64)}}},
            422,
            "at most 64 variables (65)",
        ),
        (
            {"env": {"TITLE": "x", "A": "a" * 8192, "B": "b" * 8192}},
            422,
            "at most 16384 bytes as JSON (16416)",
        ),
        ({"size": "large"}, 409, "quota is 2"),
        ({"size": "gpu"}, 409, "1 GPUs; its quota is 0"),
    ]
    for body, status, message in cases:
        response = create(client, user, group, **body)
        assert response.status_code == status, (body, response.get_data(as_text=True))
        assert message in response.get_json()["message"], body
    # A group's name reaches paths (the group volume's): it is checked where it enters.
    for name in ("../../etc", "a/b", "-x"):
        response = create(client, user, name)
        assert response.status_code == 422, response.get_data(as_text=True)
        error = response.get_json()
        assert (error["field"], error["message"]) == ("group", "group: must be a group's name")
    assert client.get(f"/spawner/v1/apps?group={group}", headers=user.headers).get_json() == []
    assert kube.store.get("namespaces", None, namespace_of(group)) is None


def test_the_groups_quota_covers_all_its_running_apps(
    client: FlaskClient, new_group: Callable[[], str], member: Member
) -> None:
    group = new_group()
    user = member(group)
    first = create(client, user, group).get_json()["id"]
    second = create(client, user, group).get_json()["id"]
    third = create(client, user, group)
    assert third.status_code == 409
    assert third.get_json()["code"] == "quota_exceeded"
    in_phase(client, user, first, "Ready")
    in_phase(client, user, second, "Ready")
    # A stopped app uses nothing: another may start in its place, and it may not come back.
    stop = client.post(f"/spawner/v1/apps/{second}/stop", headers=user.headers)
    assert stop.status_code == 202
    in_phase(client, user, second, "Stopped")
    assert create(client, user, group).status_code == 201
    start = client.post(f"/spawner/v1/apps/{second}/start", headers=user.headers)
    assert start.status_code == 409 and start.get_json()["code"] == "quota_exceeded"


def test_an_update_replaces_the_pod_while_the_old_one_serves(
    client: FlaskClient, kube: KubernetesEmulator, new_group: Callable[[], str], member: Member
) -> None:
    group = new_group()
    user = member(group)
    app_id = create(client, user, group).get_json()["id"]
    in_phase(client, user, app_id, "Ready")
    (old,) = app_pods(kube, group, app_id)
    kube.cluster.settings.start_seconds = 1.0
    try:
        response = client.patch(
            f"/spawner/v1/apps/{app_id}",
            json={"env": {"TITLE": "New results"}, "scope": "public"},
            headers=user.headers,
        )
        assert response.status_code == 202, response.get_data(as_text=True)
        assert response.get_json()["phase"] == "Updating"
        # A second change waits for the first.
        again = client.patch(
            f"/spawner/v1/apps/{app_id}", json={"scope": "group"}, headers=user.headers
        )
        assert again.status_code == 409
        # The new pod starts beside the old one, which still serves.
        wait_for(lambda: len(app_pods(kube, group, app_id)) == 2, timeout=10)
        assert app_of(client, user, app_id)["phase"] == "Updating"
        done = in_phase(client, user, app_id, "Ready")
    finally:
        kube.cluster.settings.start_seconds = 0.0
    assert done["env"] == {"TITLE": "New results"}
    assert done["scope"] == "public"
    wait_for(lambda: len(app_pods(kube, group, app_id)) == 1)
    (new,) = app_pods(kube, group, app_id)
    assert new["metadata"]["name"] != old["metadata"]["name"]
    assert env_of(new)["TITLE"] == "New results"
    ingress = kube.store.get("gafaelfawringresses", namespace_of(group), f"app-{app_id}")
    assert ingress is not None and ingress["config"]["scopes"] == {"anonymous": True}


def test_stop_start_and_delete(
    client: FlaskClient, kube: KubernetesEmulator, new_group: Callable[[], str], member: Member
) -> None:
    group = new_group()
    user = member(group)
    app_id = create(client, user, group).get_json()["id"]
    in_phase(client, user, app_id, "Ready")
    kube.cluster.settings.pod_termination_seconds = 1.0
    try:
        stop = client.post(f"/spawner/v1/apps/{app_id}/stop", headers=user.headers)
        assert stop.status_code == 202 and stop.get_json()["phase"] == "Stopping"
        stopped = in_phase(client, user, app_id, "Stopped")
    finally:
        kube.cluster.settings.pod_termination_seconds = 0.0
    assert stopped["stopped"] is True
    assert app_pods(kube, group, app_id) == []
    start = client.post(f"/spawner/v1/apps/{app_id}/start", headers=user.headers)
    assert start.status_code == 202
    in_phase(client, user, app_id, "Ready")
    assert len(app_pods(kube, group, app_id)) == 1

    deleted = client.delete(f"/spawner/v1/apps/{app_id}", headers=user.headers)
    assert deleted.status_code == 202 and deleted.get_json()["status"] == "terminating"
    wait_for(
        lambda: client.get(f"/spawner/v1/apps/{app_id}", headers=user.headers).status_code == 404
    )
    namespace = namespace_of(group)
    for resource in ("deployments", "services", "networkpolicies", "gafaelfawringresses"):
        assert kube.store.get(resource, namespace, f"app-{app_id}") is None, resource
    assert app_pods(kube, group, app_id) == []


def test_an_app_that_cannot_run_is_in_error_with_the_reason(
    client: FlaskClient, kube: KubernetesEmulator, new_group: Callable[[], str], member: Member
) -> None:
    group = new_group()
    user = member(group)
    kube.cluster.faults.set("image_pull", "*/apps/notes:*", "manifest unknown")
    try:
        app_id = create(client, user, group, template="notes", env={}).get_json()["id"]
        failed = in_phase(client, user, app_id, "Error")
    finally:
        kube.cluster.faults.clear("image_pull")
    assert "cannot pull image registry.test/apps/notes:2" in failed["message"]
    assert "manifest unknown" in failed["message"]


@pytest.mark.parametrize("as_admin", [False, True])
def test_only_the_groups_members_and_administrators_reach_its_apps(
    client: FlaskClient,
    new_group: Callable[[], str],
    member: Member,
    admin_headers: dict[str, str],
    as_admin: bool,
) -> None:
    group = new_group()
    owner = member(group)
    outsider = member(new_group())
    app_id = create(client, owner, group).get_json()["id"]
    in_phase(client, owner, app_id, "Ready")
    headers = admin_headers if as_admin else outsider.headers
    url = f"/spawner/v1/apps/{app_id}"
    calls = [
        client.get(url, headers=headers),
        client.get(f"{url}/logs", headers=headers),
        client.patch(url, json={"scope": "public"}, headers=headers),
        client.post(f"{url}/stop", headers=headers),
        client.post(f"{url}/start", headers=headers),
        client.get(f"/spawner/v1/apps?group={group}", headers=headers),
        client.post(
            "/spawner/v1/apps",
            json={
                "template": "dashboard",
                "group": group,
                "name": "x",
                "size": "small",
                "env": {"TITLE": "t"},
            },
            headers=headers,
        ),
        client.delete(url, headers=headers),
    ]
    statuses = [response.status_code for response in calls]
    if as_admin:
        assert 403 not in statuses, [r.get_json() for r in calls]
    else:
        assert statuses == [403] * len(calls), [r.get_json() for r in calls]
        assert "not a member of group" in calls[0].get_json()["message"]
        assert app_of(client, owner, app_id)["phase"] == "Ready"


def test_stop_and_start_settle_however_quickly_they_follow_each_other(
    client: FlaskClient, kube: KubernetesEmulator, new_group: Callable[[], str], member: Member
) -> None:
    """A start sent as soon as the app reads Stopped is accepted, every time; a stop of a
    stopped app changes nothing (it stays Stopped, no operation starts), and so does a start
    of an app that runs."""
    group = new_group()
    user = member(group)
    app_id = create(client, user, group).get_json()["id"]
    in_phase(client, user, app_id, "Ready")
    url = f"/spawner/v1/apps/{app_id}"
    for _ in range(5):
        assert client.post(f"{url}/stop", headers=user.headers).status_code == 202
        in_phase(client, user, app_id, "Stopped")
        again = client.post(f"{url}/stop", headers=user.headers)
        assert again.status_code == 200 and again.get_json()["phase"] == "Stopped"
        assert app_of(client, user, app_id)["phase"] == "Stopped"
        start = client.post(f"{url}/start", headers=user.headers)
        assert start.status_code == 202, start.get_json()
        ready = in_phase(client, user, app_id, "Ready")
        assert "Stopped" not in ready["seen"]
        running = client.post(f"{url}/start", headers=user.headers)
        assert running.status_code == 200 and running.get_json()["phase"] == "Ready"

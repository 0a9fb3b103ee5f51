"""The administrators' maintenance pod against the Kubernetes emulator: the pod exactly as built
(root, privileged, every volume whole), one at a time, a finished one replaced, its own scope
(configurable), every start and delete audited, and labs' reconcile leaving it alone.

Each test names its own namespace and pod, as the emulator is shared by the whole session.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.builders import names
from app.config import parse_config
from devstack.kube import KubernetesEmulator
from tests.conftest import bearer
from tests.labs.conftest import LabUser, MakeApp, wait_for
from tests.labs.test_admin_actions import audit
from tests.labs.test_recovery import NEVER, leading

URL = "/spawner/v1/admin/pod"
IMAGE = "registry.test/lsstsqre/fsadmin:1.0"
_counter = itertools.count(1)


def admin_pod_config(raw: dict[str, Any], **pod: Any) -> tuple[dict[str, Any], str, str]:
    """``raw`` with three lab volumes and a maintenance pod of its own names; those names."""
    raw = copy.deepcopy(raw)
    n = f"{next(_counter)}-{time.time_ns() % 10**6}"
    namespace, name = f"fsadmin-{n}", "fsadmin"
    raw["lab"]["volumes"] = [
        {"name": "home", "type": "hostPath", "path": "/srv/home"},
        {"name": "project", "type": "nfs", "server": "nfs.test", "path": "/project"},
        {"name": "datasets", "type": "nfs", "server": "nfs.test", "path": "/ds", "readOnly": True},
    ]
    raw["lab"]["volumeMounts"] = [{"volumeName": "home", "mountPath": "/home"}]
    raw["admin"] = {"pod": {"image": IMAGE, "namespace": namespace, "name": name, **pod}}
    return raw, namespace, name


@pytest.fixture(autouse=True)
def _remove_admin_pods(kube: KubernetesEmulator) -> Iterator[None]:
    """Remove each test's maintenance pods and namespaces after it: the emulator's nodes are
    shared by the whole session, and a pod left running takes room later labs need."""
    yield
    for namespace in kube.store.list("namespaces", None):
        ns = namespace["metadata"]["name"]
        if ns.startswith(("fsadmin-", "nublado-fsadmin-")):
            for pod in kube.store.list("pods", ns):
                kube.store.delete("pods", ns, pod["metadata"]["name"])
            kube.store.delete("namespaces", None, ns)


@pytest.fixture
def pod_admin(tokens: dict[str, str]) -> dict[str, str]:
    """The demo administrator who holds ``admin:lab-pods``."""
    return bearer(tokens["admin-user"])


def make(
    lab_raw_config: dict[str, Any], make_app: Callable[..., Flask], **pod: Any
) -> tuple[FlaskClient, str, str]:
    raw, namespace, name = admin_pod_config(lab_raw_config, **pod)
    return make_app(parse_config(raw)).test_client(), namespace, name


def running(client: FlaskClient, headers: dict[str, str]) -> dict[str, Any] | None:
    response = client.get(URL, headers=headers)
    body: dict[str, Any] = response.get_json()
    return body if response.status_code == 200 and body["phase"] == "Running" else None


def test_the_pod_is_root_privileged_with_every_volume_whole_in_a_privileged_namespace(
    lab_raw_config: dict[str, Any],
    make_app: Callable[..., Flask],
    kube: KubernetesEmulator,
    pod_admin: dict[str, str],
) -> None:
    client, namespace, name = make(
        lab_raw_config,
        make_app,
        cpu=0.5,
        memory="1Gi",
        nodeSelector={"disk": "fast"},
        tolerations=[{"key": "admin", "operator": "Exists", "effect": "NoSchedule"}],
        args=["sleep", "infinity"],
    )
    started = client.post(URL, headers=pod_admin)
    assert started.status_code == 202, started.get_data(as_text=True)
    body = started.get_json()
    assert (body["namespace"], body["name"], body["image"]) == (namespace, name, IMAGE)
    assert body["mounts"] == [
        {"volume": "home", "path": "/mnt/home", "read_only": False},
        {"volume": "project", "path": "/mnt/project", "read_only": False},
        {"volume": "datasets", "path": "/mnt/datasets", "read_only": True},
    ]

    ns = kube.store.get("namespaces", None, namespace)
    assert ns is not None
    assert ns["metadata"]["labels"] == {
        names.MANAGED_BY_LABEL: names.MANAGED_BY,
        names.COMPONENT_LABEL: "admin-pod",
        "pod-security.kubernetes.io/enforce": "privileged",
        "kubernetes.io/metadata.name": namespace,  # the API server's own
    }
    pod = kube.store.get("pods", namespace, name)
    assert pod is not None
    assert pod["metadata"]["labels"] == {
        names.MANAGED_BY_LABEL: names.MANAGED_BY,
        names.COMPONENT_LABEL: "admin-pod",
    }
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {"disk": "fast"}
    assert spec["tolerations"] == [{"key": "admin", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["volumes"] == [
        {"name": "home", "hostPath": {"path": "/srv/home"}},
        {"name": "project", "nfs": {"server": "nfs.test", "path": "/project", "readOnly": False}},
        {"name": "datasets", "nfs": {"server": "nfs.test", "path": "/ds", "readOnly": True}},
    ]
    (container,) = spec["containers"]
    assert container["image"] == IMAGE
    assert container["args"] == ["sleep", "infinity"]
    assert "command" not in container
    security = container["securityContext"]
    assert security["privileged"] is True
    assert (security["runAsUser"], security["runAsNonRoot"]) == (0, False)
    assert container["resources"] == {
        "limits": {"cpu": "500m", "memory": "1Gi"},
        "requests": {"cpu": "500m", "memory": "1Gi"},
    }
    assert container["volumeMounts"] == [
        {"name": "home", "mountPath": "/mnt/home"},
        {"name": "project", "mountPath": "/mnt/project"},
        {"name": "datasets", "mountPath": "/mnt/datasets", "readOnly": True},
    ]
    assert all("subPath" not in m for m in container["volumeMounts"])
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {
        "MOUNT_PREFIX": "/mnt",
        "ADMIN_MOUNT_HOME": "/mnt/home",
        "ADMIN_MOUNT_PROJECT": "/mnt/project",
        "ADMIN_MOUNT_DATASETS": "/mnt/datasets",
    }


def test_only_the_named_volumes_under_the_configured_prefix(
    lab_raw_config: dict[str, Any],
    make_app: Callable[..., Flask],
    kube: KubernetesEmulator,
    pod_admin: dict[str, str],
) -> None:
    client, namespace, name = make(
        lab_raw_config, make_app, volumes=["datasets"], mountPrefix="/repair"
    )
    assert client.post(URL, headers=pod_admin).status_code == 202
    pod = kube.store.get("pods", namespace, name)
    assert pod is not None
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["datasets"]
    assert pod["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "datasets", "mountPath": "/repair/datasets", "readOnly": True}
    ]


def test_start_twice_gives_one_pod_and_status_follows_it_until_deleted(
    lab_raw_config: dict[str, Any],
    make_app: Callable[..., Flask],
    kube: KubernetesEmulator,
    pod_admin: dict[str, str],
) -> None:
    client, namespace, name = make(lab_raw_config, make_app)
    assert client.get(URL, headers=pod_admin).status_code == 404
    first = client.post(URL, headers=pod_admin)
    assert first.status_code == 202
    uid = kube.store.get("pods", namespace, name)["metadata"]["uid"]  # type: ignore[index]

    status = wait_for(lambda: running(client, pod_admin))
    assert status["ready"] is True and status["node"] and status["started"]
    again = client.post(URL, headers=pod_admin)
    assert again.status_code == 200
    assert again.get_json()["phase"] == "Running"
    assert again.get_json()["detail"] == "already started"
    assert [p["metadata"]["uid"] for p in kube.store.list("pods", namespace)] == [uid]

    deleted = client.delete(URL, headers=pod_admin)
    assert deleted.status_code == 202
    assert deleted.get_json()["terminating"] is True
    wait_for(lambda: kube.store.get("pods", namespace, name) is None)
    assert kube.store.get("namespaces", None, namespace) is not None  # kept for the next pod
    assert client.get(URL, headers=pod_admin).get_json()["code"] == "not_found"
    gone = client.delete(URL, headers=pod_admin)
    assert gone.status_code == 404
    assert gone.get_json()["code"] == "not_found"

    # Starting again reuses the namespace.
    assert client.post(URL, headers=pod_admin).status_code == 202
    assert kube.store.get("pods", namespace, name)["metadata"]["uid"] != uid  # type: ignore[index]


def test_a_finished_pod_is_replaced_by_a_new_one(
    lab_raw_config: dict[str, Any],
    make_app: Callable[..., Flask],
    kube: KubernetesEmulator,
    pod_admin: dict[str, str],
) -> None:
    # ``false`` exits 1 at once: with restartPolicy Never the pod ends Failed.
    client, namespace, name = make(lab_raw_config, make_app, command=["false"])
    assert client.post(URL, headers=pod_admin).status_code == 202
    failed = wait_for(
        lambda: (s := client.get(URL, headers=pod_admin).get_json())["phase"] == "Failed" and s
    )
    assert failed["ready"] is False
    old = kube.store.get("pods", namespace, name)["metadata"]["uid"]  # type: ignore[index]

    replaced = client.post(URL, headers=pod_admin)
    assert replaced.status_code == 202
    assert "replaced" in replaced.get_json()["detail"]
    assert replaced.get_json()["phase"] == "Pending"
    pods = kube.store.list("pods", namespace)
    assert [p["metadata"]["uid"] != old for p in pods] == [True]


def test_refused_without_the_scope_and_then_nothing_is_audited_or_created(
    lab_raw_config: dict[str, Any],
    make_app: Callable[..., Flask],
    kube: KubernetesEmulator,
    admin_headers: dict[str, str],
    new_user: Callable[..., LabUser],
) -> None:
    client, namespace, name = make(lab_raw_config, make_app)
    user = new_user()
    for headers in (admin_headers, user.headers):
        for method in ("POST", "GET", "DELETE"):
            refused = client.open(URL, method=method, headers=headers)
            assert refused.status_code == 403, (method, refused.get_data(as_text=True))
            body = refused.get_json()
            assert body["code"] == "permission_denied"
            assert "admin:lab-pods" in body["message"]
    assert client.post(URL).status_code == 401
    assert kube.store.get("namespaces", None, namespace) is None
    assert kube.store.get("pods", namespace, name) is None
    assert audit(client, admin_headers) == []


def test_a_deployment_may_grant_it_to_admin_notebook_instead(
    lab_raw_config: dict[str, Any],
    make_app: Callable[..., Flask],
    admin_headers: dict[str, str],
    new_user: Callable[..., LabUser],
) -> None:
    client, _, _ = make(lab_raw_config, make_app, scope="admin:notebook")
    assert client.post(URL, headers=admin_headers).status_code == 202
    narrow = new_user(scopes=("admin:lab-pods",))
    refused = client.get(URL, headers=narrow.headers)
    assert refused.status_code == 403
    assert "admin:notebook" in refused.get_json()["message"]
    assert client.delete(URL, headers=admin_headers).status_code == 202


def test_starts_and_deletes_are_audited_whatever_their_answer(
    lab_raw_config: dict[str, Any],
    make_app: Callable[..., Flask],
    admin_headers: dict[str, str],
    pod_admin: dict[str, str],
) -> None:
    client, _, _ = make(lab_raw_config, make_app)
    assert client.post(URL, headers=pod_admin).status_code == 202
    assert client.post(URL, headers=pod_admin).status_code == 200
    assert client.get(URL, headers=pod_admin).status_code == 200  # reads are not actions
    assert client.delete(URL, headers=pod_admin).status_code == 202
    wait_for(lambda: client.get(URL, headers=pod_admin).status_code == 404)
    assert client.delete(URL, headers=pod_admin).status_code == 404
    entries = audit(client, admin_headers)
    assert [(e["action"], e["outcome"], e["status"]) for e in entries] == [
        ("admin-pod.delete", "not_found", 404),
        ("admin-pod.delete", "ok", 202),
        ("admin-pod.start", "ok", 200),
        ("admin-pod.start", "ok", 202),
    ]
    assert {(e["actor"], e["target"]) for e in entries} == {("admin-user", "platform")}
    assert entries[-1]["detail"] == "started"


def test_without_an_image_a_start_says_which_setting_is_missing(
    lab_raw_config: dict[str, Any],
    make_app: Callable[..., Flask],
    kube: KubernetesEmulator,
    admin_headers: dict[str, str],
    pod_admin: dict[str, str],
) -> None:
    raw, namespace, _ = admin_pod_config(lab_raw_config)
    del raw["admin"]["pod"]["image"]
    client = make_app(parse_config(raw)).test_client()
    refused = client.post(URL, headers=pod_admin)
    assert refused.status_code == 409
    body = refused.get_json()
    assert body["code"] == "not_configured"
    assert "admin.pod.image" in body["message"]
    assert kube.store.get("namespaces", None, namespace) is None
    assert client.get(URL, headers=pod_admin).status_code == 404
    (entry,) = audit(client, admin_headers)
    assert (entry["action"], entry["outcome"], entry["status"]) == (
        "admin-pod.start",
        "not_configured",
        409,
    )


def test_the_reconcile_leaves_the_pod_and_its_namespace_alone(
    lab_raw_config: dict[str, Any],
    watcher_app: MakeApp,
    kube: KubernetesEmulator,
    admin_headers: dict[str, str],
    pod_admin: dict[str, str],
) -> None:
    # Its namespace even looks like a lab's (the lab prefix, then a name): only labels decide.
    raw, _, name = admin_pod_config(lab_raw_config)
    namespace = f"nublado-{raw['admin']['pod']['namespace']}"
    raw["admin"]["pod"]["namespace"] = namespace
    app = watcher_app(raw, reconcileSeconds=NEVER)
    client = app.test_client()
    watcher = leading(app)
    assert client.post(URL, headers=pod_admin).status_code == 202
    wait_for(lambda: running(client, pod_admin))
    uid = kube.store.get("pods", namespace, name)["metadata"]["uid"]  # type: ignore[index]

    # Two runs: a namespace nothing accounts for is deleted on the second sighting.
    for _ in range(2):
        before = watcher.reconciles
        assert client.post("/spawner/v1/admin/reconcile", headers=admin_headers).status_code == 200
        assert watcher.reconciles > before
    pod = kube.store.get("pods", namespace, name)
    ns = kube.store.get("namespaces", None, namespace)
    assert pod is not None and pod["metadata"]["uid"] == uid
    assert not pod["metadata"].get("deletionTimestamp")
    assert ns is not None and not ns["metadata"].get("deletionTimestamp")
    assert client.get(f"/spawner/v1/labs/{name}", headers=admin_headers).status_code == 404
    assert (
        client.get(
            f"/spawner/v1/labs/{namespace[len('nublado-') :]}", headers=admin_headers
        ).status_code
        == 404
    )
    assert client.delete(URL, headers=pod_admin).status_code == 202

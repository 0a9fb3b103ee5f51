"""File servers through the service's routes on the emulated cluster: ``GET /files`` makes
the caller's objects as the design says and answers once it serves, the caller's and the
administrators' routes, and who may call what; where file servers are off, none of it
exists."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from devstack.kube import KubernetesEmulator
from tests.fileservers.conftest import (
    NAMESPACE,
    gone,
    job_of,
    objects_of,
    start,
    wait_for,
)
from tests.labs.conftest import LabUser, read_stream


def test_get_files_starts_the_callers_server_as_them_and_answers_where_it_is(
    client: FlaskClient, kube: KubernetesEmulator, files_user: Callable[..., LabUser]
) -> None:
    user = files_user()
    response = start(client, user)
    assert response.status_code == 200, response.get_json()
    url = f"https://data.test/files/{user.username}/"
    assert response.get_json() == {
        "username": user.username,
        "url": url,
        "running": True,
        "mounts": [
            {"name": "home", "path": "/home", "readOnly": False, "url": f"{url}home/"},
            {"name": "datasets", "path": "/datasets", "readOnly": True, "url": f"{url}datasets/"},
        ],
    }
    assert objects_of(kube, user.username) == dict.fromkeys(objects_of(kube, user.username), True)

    job = job_of(kube, user.username)
    assert job is not None
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsUser": user.uid,
        "runAsGroup": user.uid,
        "supplementalGroups": [3100],
    }
    assert pod["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] == 0
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert json.loads(env["FILESERVER_MOUNTS"]) == [
        {"name": "home", "path": "/home", "readOnly": False},
        {"name": "datasets", "path": "/datasets", "readOnly": True},
    ]
    assert env["FILESERVER_URL_PREFIX"] == f"/files/{user.username}"
    assert env["FILESERVER_IDLE_TIMEOUT"] == "3600"
    assert container["readinessProbe"]["tcpSocket"] == {"port": 8000}
    assert container["resources"] == {
        "requests": {"cpu": "50m", "memory": "64Mi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    assert pod["tolerations"] == [{"key": "files", "operator": "Exists", "effect": "NoSchedule"}]
    assert container["securityContext"]["runAsNonRoot"] is True
    assert container["volumeMounts"] == [
        {"name": "home", "mountPath": "/home"},
        {"name": "datasets", "mountPath": "/datasets", "readOnly": True},
    ]
    # Exactly the lab volumes the mounts name, as the lab has them.
    assert [v["name"] for v in pod["volumes"]] == ["home", "datasets"]
    assert pod["volumes"][0]["nfs"]["server"] == "nfs.test"

    name = f"{user.username}-fs"
    ingress = kube.store.get("gafaelfawringresses", NAMESPACE, name)
    assert ingress is not None
    assert ingress["config"]["username"] == user.username
    assert ingress["config"]["scopes"] == {"all": ["write:files"]}
    assert ingress["config"]["authType"] == "basic"
    assert ingress["config"]["allowOptions"] is True
    assert ingress["template"]["spec"]["rules"][0]["host"] == "data.test"
    assert "delegate" not in ingress["config"]
    (path,) = ingress["template"]["spec"]["rules"][0]["http"]["paths"]
    assert path["path"] == f"/files/{user.username}"
    assert path["backend"]["service"] == {"name": name, "port": {"number": 8000}}
    policy = kube.store.get("networkpolicies", NAMESPACE, name)
    assert policy is not None
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
    ]

    # A second call, while it runs, answers at once with the same server.
    again = start(client, user)
    assert again.status_code == 200 and again.get_json()["url"] == url
    assert job_of(kube, user.username)["metadata"]["uid"] == job["metadata"]["uid"]  # type: ignore[index]


def test_a_browser_gets_a_page_saying_how_to_mount_it(
    client: FlaskClient, files_user: Callable[..., LabUser]
) -> None:
    user = files_user()
    page = client.get("/files", headers={**user.headers, "Accept": "text/html,*/*;q=0.8"})
    assert page.status_code == 200 and page.mimetype == "text/html"
    text = page.get_data(as_text=True)
    url = f"https://data.test/files/{user.username}/"
    assert f'href="{url}"' in text
    assert f"mount -t davfs {url}" in text
    assert "Connect to Server" in text and "Map network drive" in text
    assert "1 hour" in text and "write:files" in text


def test_the_callers_routes_and_the_administrators(
    client: FlaskClient,
    kube: KubernetesEmulator,
    files_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
) -> None:
    user, other = files_user(), files_user()
    status = client.get("/fileserver/v1/user-status", headers=user.headers)
    assert status.status_code == 404
    assert start(client, user).status_code == 200

    assert client.get("/fileserver/v1/user-status", headers=user.headers).get_json() == {
        "running": True,
        "username": user.username,
        "url": f"https://data.test/files/{user.username}/",
    }
    listed = client.get("/fileserver/v1/users", headers=admin_headers).get_json()
    assert user.username in listed and other.username not in listed
    one = client.get(f"/fileserver/v1/users/{user.username}", headers=admin_headers)
    assert one.get_json() == {"running": True}
    none = client.get(f"/fileserver/v1/users/{other.username}", headers=admin_headers)
    assert none.status_code == 404 and none.get_json()["code"] == "not_found"

    record = client.get(f"/spawner/v1/fileservers/{user.username}", headers=user.headers)
    assert record.get_json()["status"] == "running"
    assert record.get_json()["url"] == f"https://data.test/files/{user.username}/"
    events = read_stream(client, f"/spawner/v1/fileservers/{user.username}/events", user.headers)
    assert events[0].data == f"File server of {user.username} requested"
    assert events[-1].type == "complete"

    # Someone else's server is neither theirs to read nor to stop; nor is the admin list.
    for method, path in (
        ("get", f"/spawner/v1/fileservers/{user.username}"),
        ("delete", f"/spawner/v1/fileservers/{user.username}"),
        ("get", "/fileserver/v1/users"),
        ("delete", f"/fileserver/v1/users/{user.username}"),
    ):
        refused = getattr(client, method)(path, headers=other.headers)
        assert refused.status_code == 403, (method, path)

    deleted = client.delete(f"/fileserver/v1/users/{user.username}", headers=admin_headers)
    assert deleted.status_code == 204
    assert gone(kube, user.username)
    assert (
        client.get("/fileserver/v1/users", headers=admin_headers).get_json().count(user.username)
        == 0
    )
    again = client.delete(f"/fileserver/v1/users/{user.username}", headers=admin_headers)
    assert again.status_code == 404


def test_the_owner_stops_their_own(
    client: FlaskClient, kube: KubernetesEmulator, files_user: Callable[..., LabUser]
) -> None:
    user = files_user()
    assert start(client, user).status_code == 200
    stopping = client.delete(f"/spawner/v1/fileservers/{user.username}", headers=user.headers)
    assert stopping.status_code == 202 and stopping.get_json()["status"] == "terminating"
    wait_for(lambda: gone(kube, user.username))
    wait_for(
        lambda: client.get("/fileserver/v1/user-status", headers=user.headers).status_code == 404
    )


def test_a_token_without_the_scope_is_refused(
    client: FlaskClient, kube: KubernetesEmulator, files_user: Callable[..., LabUser]
) -> None:
    user = files_user(scopes=("exec:notebook",))
    refused = start(client, user)
    assert refused.status_code == 403
    assert "write:files" in refused.get_json()["message"]
    assert job_of(kube, user.username) is None


def test_a_user_without_a_uid_is_told_so(
    client: FlaskClient, gafaelfawr: Any, kube: KubernetesEmulator
) -> None:
    from devstack.gafaelfawr import UserSpec

    gafaelfawr.add_user(UserSpec(username="fs-nouid", uid=None, gid=None, groups=()))
    token = gafaelfawr.issue_token("fs-nouid", ["write:files"])
    refused = client.get("/files", headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 422
    assert "no UID" in refused.get_json()["message"]
    assert job_of(kube, "fs-nouid") is None


def test_where_file_servers_are_off_their_routes_do_not_exist(
    lab_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    files_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
) -> None:
    client = make_app(parse_config(lab_raw_config)).test_client()
    user = files_user()
    for path, headers in (
        ("/files", user.headers),
        ("/fileserver/v1/user-status", user.headers),
        ("/fileserver/v1/users", admin_headers),
        (f"/spawner/v1/fileservers/{user.username}", admin_headers),
    ):
        answer = client.get(path, headers=headers)
        assert answer.status_code == 404, path
        assert "not enabled" in answer.get_json()["message"]


def test_objects_left_by_an_earlier_server_are_replaced(
    client: FlaskClient, kube: KubernetesEmulator, files_user: Callable[..., LabUser]
) -> None:
    """What an earlier server's interrupted deletion left behind (a Service to the wrong
    port, a policy admitting no one, an ingress for another scope) is replaced by the new
    server's, not refused."""
    user = files_user()
    name = f"{user.username}-fs"
    labels = {
        "app.kubernetes.io/managed-by": "lab-spawner",
        "app.kubernetes.io/component": "fileserver",
        "lab-spawner.jupyter.org/user": user.username,
    }
    meta = {"name": name, "namespace": NAMESPACE, "labels": labels}
    stale = {
        "services": {
            "apiVersion": "v1",
            "kind": "Service",
            "spec": {"selector": labels, "ports": [{"name": "http", "port": 9}]},
        },
        "networkpolicies": {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "spec": {"podSelector": {"matchLabels": labels}, "policyTypes": ["Ingress"]},
        },
        "gafaelfawringresses": {
            "apiVersion": "gafaelfawr.lsst.io/v1alpha1",
            "kind": "GafaelfawrIngress",
            "config": {"baseUrl": "https://data.test", "scopes": {"all": ["read:old"]}},
            "template": {"metadata": {"name": name}, "spec": {"rules": []}},
        },
    }
    for resource, body in stale.items():
        kube.store.create(resource, {**body, "metadata": meta})
    assert start(client, user).status_code == 200
    service = kube.store.get("services", NAMESPACE, name)
    assert service is not None and service["spec"]["ports"][0]["port"] == 8000
    policy = kube.store.get("networkpolicies", NAMESPACE, name)
    assert policy is not None and policy["spec"]["ingress"]
    ingress = kube.store.get("gafaelfawringresses", NAMESPACE, name)
    assert ingress is not None and ingress["config"]["scopes"] == {"all": ["write:files"]}

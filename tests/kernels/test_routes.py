"""The kernel routes end to end, against the emulated cluster: a kernel pod beside a running
lab with its key in a Secret only, the checks a request passes first (creating nothing when
refused), fast failures, ownership, deletion with a grace period, and kernels going with their
lab."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest
from flask.testing import FlaskClient

from app.extensions.labs import machinery_of
from app.workloads.refs import kernel_ref
from devstack.kube import KubernetesEmulator
from tests.kernels.conftest import kernel_url, new_key, settled, start, with_lab
from tests.labs.conftest import LabUser, wait_for

KEY_SOURCE = {"secretKeyRef": {"name": "", "key": "key"}}


def _kernel_pods(kube: KubernetesEmulator, user: LabUser) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in kube.store.list("pods", f"nublado-{user.username}")
        if p["metadata"]["name"].startswith("kernel-")
    ]


def test_a_kernel_runs_beside_the_lab_with_its_key_in_its_secret_only(
    client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    user = new_user()
    assert start(client, user).status_code == 409, "no running lab yet"
    with_lab(client, user)
    key = new_key()
    response = start(client, user, key=key, env={"OMP_NUM_THREADS": "2"})
    assert response.status_code == 201, response.get_data(as_text=True)
    created = response.get_json()
    kernel_id, namespace = created["kernel_id"], f"nublado-{user.username}"
    assert (created["status"], created["owner"], created["namespace"]) == (
        "starting",
        user.username,
        namespace,
    )
    assert created["usage"]["kernels"] == 1
    running = settled(client, user, kernel_id)
    assert running["status"] == "running", running
    assert running["ip"] and running["ports"] == {
        "shell": 50001,
        "iopub": 50002,
        "stdin": 50003,
        "control": 50004,
        "hb": 50005,
    }

    name = f"kernel-{kernel_id}"
    pod = kube.store.get("pods", namespace, name)
    assert pod is not None
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "labspawner.kernels.launch"]
    env = {e["name"]: e for e in container["env"]}
    assert env["KERNEL_KEY"]["valueFrom"] == {"secretKeyRef": {"name": name, "key": "key"}}
    assert env["OMP_NUM_THREADS"]["value"] == "2"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert pod["spec"]["securityContext"]["runAsUser"] == user.uid
    assert pod["spec"]["restartPolicy"] == "Never"
    secret = kube.store.get("secrets", namespace, name)
    assert secret is not None
    assert base64.b64decode(secret["data"]["key"]).decode() == key
    # The key is in the Secret and nowhere else: not the pod, a ConfigMap, a record, a log.
    for resource in ("pods", "configmaps", "networkpolicies"):
        assert key not in json.dumps(kube.store.list(resource, namespace))
    listed = client.get(f"/spawner/v1/labs/{user.username}/kernels", headers=user.headers)
    assert [k["kernel_id"] for k in listed.get_json()] == [kernel_id]
    assert key not in listed.get_data(as_text=True)
    assert key not in caplog.text
    assert kube.store.get("networkpolicies", namespace, f"nb-{user.username}-kernels")
    quota = kube.store.get("resourcequotas", namespace, f"nb-{user.username}-quota")
    assert quota is not None
    # The lab (small: 1 CPU limit) and the kernel (small too) fit.
    assert quota["spec"]["hard"]["limits.cpu"] == "2"

    # Another user sees and deletes nothing of it; an administrator sees it.
    other = new_user()
    assert client.get(kernel_url(user, kernel_id), headers=other.headers).status_code == 403
    assert client.delete(kernel_url(user, kernel_id), headers=other.headers).status_code == 403
    assert client.get(kernel_url(user, kernel_id), headers=admin_headers).status_code == 200

    deleted = client.delete(f"{kernel_url(user, kernel_id)}?grace_seconds=0", headers=user.headers)
    assert deleted.status_code == 202, deleted.get_data(as_text=True)
    assert deleted.get_json()["status"] == "terminating"
    wait_for(
        lambda: client.get(kernel_url(user, kernel_id), headers=user.headers).status_code == 404
    )
    assert kube.store.get("pods", namespace, name) is None
    assert kube.store.get("secrets", namespace, name) is None
    lowered = kube.store.get("resourcequotas", namespace, f"nb-{user.username}-quota")
    assert lowered is not None and lowered["spec"]["hard"]["limits.cpu"] == "1"
    assert client.delete(kernel_url(user, kernel_id), headers=user.headers).status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "named"),
    [
        ({"size": "huge"}, 422, "unknown size 'huge'"),
        # A tier kept for some kinds of cluster is not one for kernels.
        ({"size": "gpu"}, 422, "unknown size 'gpu'"),
        ({"image": "registry.test/somebody/else:1"}, 422, "image"),
        ({"env": {"1X": "x"}}, 422, "env"),
        ({"env": {"X" * 129: "x"}}, 422, "must be an environment variable name"),
        ({"env": {f"V{i}": "x" for i in range(65)}}, 422, "at most 64 variables (65)"),
        ({"env": {"BIG": "x" * 16384}}, 422, "at most 16384 bytes as JSON (16395)"),
        ({"connection": {"key": "NOT-HEX"}}, 422, "lowercase hex"),
        ({"connection": {"key": "ab" * 16, "transport": "ipc"}}, 422, "transport"),
        ({"kernel_id": "Bad_Id"}, 422, "kernel_id"),
    ],
)
def test_a_refused_kernel_creates_nothing(
    client: FlaskClient,
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
    body: dict[str, object],
    status: int,
    named: str,
) -> None:
    user = new_user()
    with_lab(client, user)
    response = start(client, user, **body)
    assert response.status_code == status, response.get_data(as_text=True)
    assert named in response.get_data(as_text=True)
    assert not _kernel_pods(kube, user)
    listed = client.get(f"/spawner/v1/labs/{user.username}/kernels", headers=user.headers)
    assert listed.get_json() == []


def test_kernels_count_against_the_budget_and_an_id_is_taken_once(
    client: FlaskClient, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    user = new_user()
    with_lab(client, user)
    first = start(client, user, kernel_id="first")
    assert first.status_code == 201, first.get_data(as_text=True)
    again = start(client, user, kernel_id="first")
    assert again.status_code == 409 and again.get_json()["code"] == "conflict"
    assert start(client, user, kernel_id="second").status_code == 201
    third = start(client, user, kernel_id="third")
    assert third.status_code == 409, third.get_data(as_text=True)
    assert third.get_json()["code"] == "quota_exceeded"
    assert "the kernels budget would be passed: 3 in all, 2 allowed" in third.get_json()["message"]
    wait_for(lambda: sorted(_kernel_pods(kube, user)) == ["kernel-first", "kernel-second"])
    # One that ended holds nothing: deleting one frees its place.
    assert client.delete(kernel_url(user, "first"), headers=user.headers).status_code == 202
    wait_for(lambda: client.get(kernel_url(user, "first"), headers=user.headers).status_code == 404)
    assert start(client, user, kernel_id="third").status_code == 201


def test_a_kernel_that_cannot_start_fails_fast_with_the_reason(
    client: FlaskClient,
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
    fresh_image: str,
) -> None:
    user = new_user()
    with_lab(client, user)
    # No node is in the tier's pool.
    unschedulable = start(client, user, size="elsewhere").get_json()
    failed = settled(client, user, unschedulable["kernel_id"])
    assert failed["status"] == "failed" and "cannot be scheduled" in failed["error"], failed

    kube.cluster.faults.set("image_pull", f"{fresh_image}*", "manifest unknown")
    try:
        pulled = start(client, user, image=fresh_image).get_json()
        failed = settled(client, user, pulled["kernel_id"])
    finally:
        kube.cluster.faults.clear("image_pull")
    assert failed["status"] == "failed", failed
    assert "cannot pull image" in failed["error"] and "manifest unknown" in failed["error"]


def test_a_bad_grace_period_is_refused(
    client: FlaskClient, new_user: Callable[..., LabUser]
) -> None:
    user = new_user()
    with_lab(client, user)
    kernel_id = start(client, user).get_json()["kernel_id"]
    for bad in ("-1", "301", "1.5", "soon", ""):
        response = client.delete(
            f"{kernel_url(user, kernel_id)}?grace_seconds={bad}", headers=user.headers
        )
        assert response.status_code == 422, bad
        body = response.get_json()
        assert (body["code"], body["field"]) == ("invalid_request", "grace_seconds"), bad
        assert body["message"] == "grace_seconds: must be a whole number from 0 to 300", bad
    assert settled(client, user, kernel_id)["status"] == "running"


def test_kernels_go_with_their_lab(
    client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    user = new_user()
    with_lab(client, user)
    kernel_id = start(client, user).get_json()["kernel_id"]
    assert settled(client, user, kernel_id)["status"] == "running"
    lab = f"/spawner/v1/labs/{user.username}"
    assert client.delete(lab, headers=admin_headers).status_code == 202
    wait_for(
        lambda: client.get(kernel_url(user, kernel_id), headers=user.headers).status_code == 404
    )
    wait_for(lambda: kube.store.get("namespaces", None, f"nublado-{user.username}") is None)


def test_a_kernels_environment_follows_the_labs_rules(
    client: FlaskClient, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    """Names the platform sets (its variables, the kernel's own ``KERNEL_*`` and ``POD_IP``)
    keep the platform's values, names that change how processes start reach no container,
    and the kernel's events say which; the rest is the kernel's."""
    user = new_user()
    with_lab(client, user)
    env = {
        "LD_PRELOAD": "/tmp/x.so",
        "PATH": "/tmp/bin",
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "ACCESS_TOKEN": "not-the-token",
        "MEM_LIMIT": "1",
        "KERNEL_KEY": "planted",
        "POD_IP": "1.2.3.4",
        "OMP_NUM_THREADS": "4",
    }
    response = start(client, user, env=env)
    assert response.status_code == 201, response.get_data(as_text=True)
    kernel_id = response.get_json()["kernel_id"]
    assert settled(client, user, kernel_id)["status"] == "running"
    pod = kube.store.get("pods", f"nublado-{user.username}", f"kernel-{kernel_id}")
    assert pod is not None
    given = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert given["OMP_NUM_THREADS"]["value"] == "4"
    assert not {"LD_PRELOAD", "PATH", "KUBERNETES_SERVICE_HOST", "ACCESS_TOKEN", "MEM_LIMIT"} & set(
        given
    )
    assert "valueFrom" in given["KERNEL_KEY"] and "valueFrom" in given["POD_IP"]
    assert "planted" not in str(pod) and "1.2.3.4" not in str(pod)
    engine = machinery_of(client.application).engine
    events = engine.events.read(kernel_ref(user.username, kernel_id).key)
    notice = next(e.data for e in events if "From the request's environment" in e.data)
    assert "the platform sets ACCESS_TOKEN, KERNEL_KEY, MEM_LIMIT, POD_IP" in notice
    assert "not passed to the kernel: LD_PRELOAD, PATH (they change how" in notice
    assert "KUBERNETES_SERVICE_HOST (Kubernetes sets them in every container)" in notice

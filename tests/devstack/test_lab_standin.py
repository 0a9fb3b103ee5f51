"""The lab stand-in answers at a lab's URL exactly while the emulated lab pod is serving."""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest
import requests
from kubernetes.client.exceptions import ApiException

from app.builders.metadata import object_meta
from app.builders.names import LAB_CONTAINER, LAB_SUFFIX, lab_namespace, object_name
from devstack.kube import KubernetesEmulator
from devstack.kube.store import Store
from devstack.lab_standin import JUPYTER_SERVER_VERSION, LabStandIn, serving
from devstack.stack import LocalStack, StackOptions

PREFIX = "nublado"
_users = itertools.count(1)


@pytest.fixture(scope="module")
def store() -> Store:
    """A bare emulator store: no cluster runs, so only the test changes pods."""
    return Store()


@pytest.fixture(scope="module")
def standin(store: Store) -> Iterator[LabStandIn]:
    with LabStandIn(store, PREFIX) as server:
        yield server


@pytest.fixture
def username() -> str:
    """A user no other test of the module touches."""
    return f"standin{next(_users)}"


def _lab_pod(
    username: str,
    *,
    phase: str = "Pending",
    ready: bool = False,
    component: str = "lab",
    prefix: str = PREFIX,
) -> dict[str, Any]:
    """A pod with the service's own lab metadata and a kubelet-shaped status."""
    name = object_name(username, LAB_SUFFIX if component == "lab" else component)
    meta = object_meta(
        name, username, namespace=lab_namespace(prefix, username), component=component
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": LAB_CONTAINER, "image": "registry.test/lab:1"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": LAB_CONTAINER, "ready": ready}],
        },
    }


def _set_status(store: Store, pod: dict[str, Any], phase: str, ready: bool) -> None:
    def change(current: dict[str, Any]) -> None:
        current["status"]["phase"] = phase
        current["status"]["containerStatuses"][0]["ready"] = ready

    meta = pod["metadata"]
    store.mutate("pods", meta["namespace"], meta["name"], change)


def _get(standin: LabStandIn, path: str) -> requests.Response:
    return requests.get(standin.url + path, timeout=5)


def test_a_lab_answers_only_while_its_pod_runs_ready(
    store: Store, standin: LabStandIn, username: str
) -> None:
    path = f"/user/{username}/"
    assert _get(standin, path).status_code == 503

    pod = store.create("pods", _lab_pod(username))
    assert _get(standin, path).status_code == 503
    _set_status(store, pod, "Running", ready=False)
    assert _get(standin, path).status_code == 503

    _set_status(store, pod, "Running", ready=True)
    response = _get(standin, path)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {"lab": username, "standin": True}
    assert _get(standin, f"/user/{username}/api").json() == {"version": JUPYTER_SERVER_VERSION}
    assert requests.head(standin.url + path, timeout=5).status_code == 200

    store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
    response = _get(standin, path)
    assert response.status_code == 503
    assert username in response.json()["message"]


def test_a_terminating_pod_is_down_while_its_container_still_runs(
    store: Store, standin: LabStandIn, username: str
) -> None:
    pod = store.create("pods", _lab_pod(username, phase="Running", ready=True))
    assert _get(standin, f"/user/{username}/").status_code == 200

    def terminate(current: dict[str, Any]) -> None:
        current["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"

    store.mutate("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], terminate)
    assert _get(standin, f"/user/{username}/").status_code == 503


def test_only_the_users_own_lab_pod_counts(
    store: Store, standin: LabStandIn, username: str
) -> None:
    # A running pod of another component in the lab's namespace, and the user's lab under
    # another namespace prefix: neither is this user's lab as the service names it.
    store.create("pods", _lab_pod(username, phase="Running", ready=True, component="dask"))
    store.create("pods", _lab_pod(username, phase="Running", ready=True, prefix="elsewhere"))
    assert _get(standin, f"/user/{username}/").status_code == 503

    other = f"{username}x"
    store.create("pods", _lab_pod(other, phase="Running", ready=True))
    assert _get(standin, f"/user/{other}/").status_code == 200
    assert _get(standin, f"/user/{username}/").status_code == 503


def test_a_base_url_prefix_and_deeper_paths_are_accepted(
    store: Store, standin: LabStandIn, username: str
) -> None:
    store.create("pods", _lab_pod(username, phase="Running", ready=True))
    lab = {"lab": username, "standin": True}
    assert _get(standin, f"/nb/user/{username}/").json() == lab
    assert _get(standin, f"/a/b/user/{username}/lab/tree?reset").json() == lab
    assert _get(standin, f"/nb/user/{username}/api").json() == {"version": JUPYTER_SERVER_VERSION}


@pytest.mark.parametrize(
    "path", ["/", "/hub/api", "/user/", "/user//", "/user/someone", "/users/someone/"]
)
def test_other_paths_are_not_found(standin: LabStandIn, path: str) -> None:
    response = _get(standin, path)
    assert response.status_code == 404
    assert "/user/<name>/" in response.json()["message"]


def test_only_reads_are_answered(standin: LabStandIn, username: str) -> None:
    response = requests.post(f"{standin.url}/user/{username}/api", timeout=5)
    assert response.status_code == 405
    assert response.headers["Allow"] == "GET, HEAD"


def test_a_pod_the_emulated_kubelet_runs_is_served(kube: KubernetesEmulator) -> None:
    """The status the stand-in reads is the one the emulator's kubelet writes."""
    prefix = "standin"
    username = f"kubelet{next(_users)}"
    pod = _lab_pod(username, prefix=prefix)
    del pod["status"]
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    up = threading.Event()

    def watch(_event: str, resource: str, obj: dict[str, Any]) -> None:
        if resource == "pods" and obj["metadata"]["name"] == name and serving(obj):
            up.set()

    unsubscribe = kube.store.subscribe(watch)
    core = kubernetes.client.CoreV1Api(kube.api_client())
    try:
        with LabStandIn(kube.store, prefix) as standin:
            core.create_namespace({"metadata": {"name": namespace}})
            core.create_namespaced_pod(namespace, pod)
            assert up.wait(timeout=20), "the kubelet never ran the pod"
            assert _get(standin, f"/user/{username}/api").status_code == 200

            core.delete_namespaced_pod(name, namespace)
            assert _get(standin, f"/user/{username}/api").status_code == 503
    finally:
        unsubscribe()
        with contextlib.suppress(ApiException):
            core.delete_namespace(namespace)
        core.api_client.close()


def test_the_local_stack_looks_for_labs_under_its_namespace_prefix() -> None:
    standin = LocalStack().lab_standin
    assert standin is not None and standin.namespace_prefix == "nublado"
    options = StackOptions(config_overrides={"namespacePrefix": "labs"})
    standin = LocalStack(options).lab_standin
    assert standin is not None and standin.namespace_prefix == "labs"

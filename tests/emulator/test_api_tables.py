"""Tables over HTTP: the emulator answers a client that asks for ``meta.k8s.io`` Tables (as
kubectl does) with one, for a list, a get and a watch, and everyone else as before."""

from __future__ import annotations

import json
from typing import Any

import kubernetes.client
import pytest
import requests

from devstack.kube import KubernetesEmulator
from tests.emulator.conftest import WaitUntil, served_crd

KUBECTL_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
POD_COLUMNS = [
    "Name",
    "Ready",
    "Status",
    "Restarts",
    "Age",
    "IP",
    "Node",
    "Nominated Node",
    "Readiness Gates",
]


def _get(
    emulator: KubernetesEmulator, path: str, accept: str = KUBECTL_ACCEPT, **params: str
) -> requests.Response:
    return requests.get(
        emulator.url + path,
        params=params,
        headers={"Accept": accept},
        verify=str(emulator.authority.ca_path),
        timeout=10,
        stream=params.get("watch") == "true",
    )


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": "lab"}},
        "spec": {"containers": [{"name": "lab", "image": "lab:1"}]},
    }


@pytest.fixture
def pods(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> list[str]:
    """Two pods no node runs (there is none): Pending."""
    for name in ("a", "b"):
        core_v1.create_namespaced_pod(namespace, _pod(name))
    return ["a", "b"]


def test_a_list_is_a_table_of_rows_with_each_object_s_metadata(
    emulator: KubernetesEmulator, namespace: str, pods: list[str]
) -> None:
    listed = _get(emulator, f"/api/v1/namespaces/{namespace}/pods", "application/json").json()
    table = _get(emulator, f"/api/v1/namespaces/{namespace}/pods").json()
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    # The list's resourceVersion (the cluster may have written something in between).
    assert list(table["metadata"]) == ["resourceVersion"]
    assert int(table["metadata"]["resourceVersion"]) >= int(listed["metadata"]["resourceVersion"])
    columns = table["columnDefinitions"]
    assert [c["name"] for c in columns] == POD_COLUMNS
    assert [c["priority"] for c in columns] == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert columns[0]["format"] == "name"
    assert all(c["type"] == "string" and c["description"] for c in columns)
    assert [row["cells"][:4] for row in table["rows"]] == [
        [name, "0/1", "Pending", "0"] for name in pods
    ]
    first = table["rows"][0]["object"]
    assert first["kind"] == "PartialObjectMetadata"
    assert first["apiVersion"] == "meta.k8s.io/v1"
    expected = listed["items"][0]["metadata"]
    for key in ("name", "namespace", "uid", "labels", "creationTimestamp"):
        assert first["metadata"][key] == expected[key]

    # Plain JSON, or a table listed after it, is answered as before.
    assert listed["kind"] == "PodList"
    later = "application/json,application/json;as=Table;v=v1;g=meta.k8s.io"
    assert _get(emulator, "/api/v1/pods", later).json()["kind"] == "PodList"


def test_include_object_table_version_and_paging(
    emulator: KubernetesEmulator, namespace: str, pods: list[str]
) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    whole = _get(emulator, path, includeObject="Object").json()["rows"][0]["object"]
    assert (whole["kind"], whole["apiVersion"]) == ("Pod", "v1")
    assert whole["spec"]["containers"][0]["image"] == "lab:1"
    assert _get(emulator, path, includeObject="None").json()["rows"][0]["object"] is None

    refused = _get(emulator, path, includeObject="Everything")
    assert refused.status_code == 400
    assert refused.json()["message"] == 'unrecognized includeObject value: "Everything"'

    older = "application/json;as=Table;v=v1beta1;g=meta.k8s.io"
    table = _get(emulator, path, older).json()
    assert table["apiVersion"] == "meta.k8s.io/v1beta1"
    assert table["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"

    page = _get(emulator, path, limit="1").json()
    assert [row["cells"][0] for row in page["rows"]] == ["a"]
    assert page["metadata"]["remainingItemCount"] == 1
    rest = _get(emulator, path, limit="1", **{"continue": page["metadata"]["continue"]}).json()
    assert [row["cells"][0] for row in rest["rows"]] == ["b"]


def test_a_get_is_a_one_row_table(
    emulator: KubernetesEmulator, namespace: str, pods: list[str]
) -> None:
    table = _get(emulator, f"/api/v1/namespaces/{namespace}/pods/b").json()
    assert [c["name"] for c in table["columnDefinitions"]] == POD_COLUMNS
    assert [row["cells"][0] for row in table["rows"]] == ["b"]
    version = table["rows"][0]["object"]["metadata"]["resourceVersion"]
    assert table["metadata"] == {"resourceVersion": version}

    missing = _get(emulator, f"/api/v1/namespaces/{namespace}/pods/c")
    assert missing.status_code == 404
    assert missing.json()["kind"] == "Status"


def test_a_watch_sends_one_row_tables_with_the_columns_first(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    pods: list[str],
) -> None:
    events: list[dict[str, Any]] = []
    with _get(
        emulator,
        f"/api/v1/namespaces/{namespace}/pods",
        watch="true",
        timeoutSeconds="5",
    ) as response:
        response.raise_for_status()
        lines = response.iter_lines()
        events += [json.loads(next(lines)) for _ in pods]
        core_v1.patch_namespaced_pod("a", namespace, {"metadata": {"labels": {"x": "y"}}})

        def labelled(event: dict[str, Any]) -> bool:
            metadata = event["object"]["rows"][0]["object"]["metadata"]
            return bool(metadata.get("labels", {}).get("x") == "y")

        # The scheduler may note first that no node fits them (MODIFIED events too).
        for line in lines:
            events.append(json.loads(line))
            if labelled(events[-1]):
                break
    assert [e["type"] for e in events[:2]] == ["ADDED", "ADDED"]
    assert [e["object"]["rows"][0]["cells"][0] for e in events[:2]] == ["a", "b"]
    assert (events[-1]["type"], events[-1]["object"]["rows"][0]["cells"][0]) == ("MODIFIED", "a")
    assert labelled(events[-1])
    assert all(e["object"]["kind"] == "Table" and len(e["object"]["rows"]) == 1 for e in events)
    assert [len(e["object"]["columnDefinitions"]) for e in events] == [9] + [0] * (len(events) - 1)


def test_a_crd_s_printer_columns_are_served(
    emulator: KubernetesEmulator,
    extensions: kubernetes.client.ApiextensionsV1Api,
    objects: kubernetes.client.CustomObjectsApi,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    resource = served_crd(emulator, extensions, wait_until, "daskclusters")
    assert [(c.name, c.type, c.json_path) for c in resource.printer_columns] == [
        ("Workers", "integer", ".spec.worker.replicas"),
        ("Status", "string", ".status.phase"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]
    objects.create_namespaced_custom_object(
        "kubernetes.dask.org",
        "v1",
        namespace,
        "daskclusters",
        {
            "apiVersion": "kubernetes.dask.org/v1",
            "kind": "DaskCluster",
            "metadata": {"name": "dask"},
            "spec": {
                "worker": {"replicas": 2, "spec": {"containers": []}},
                "scheduler": {"spec": {"containers": []}, "service": {}},
            },
        },
    )
    path = f"/apis/kubernetes.dask.org/v1/namespaces/{namespace}/daskclusters"
    table = _get(emulator, path).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Workers", "Status", "Age"]
    assert [c["type"] for c in table["columnDefinitions"]] == [
        "string",
        "integer",
        "string",
        "date",
    ]
    name, workers, _, age = table["rows"][0]["cells"]
    assert (name, workers) == ("dask", 2)
    assert age.endswith("s")

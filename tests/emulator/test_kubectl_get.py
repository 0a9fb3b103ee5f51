"""``kubectl get`` against the emulator, with the machine's kubectl: the columns and cells a
real API server gives (the server renders them; kubectl lays them out).

The ``kubectl`` fixture (``conftest.py``) runs it with a kubeconfig for the test's emulator.
"""

from __future__ import annotations

import re
from typing import Any

import kubernetes.client
import pytest

from devstack.kube import KubernetesEmulator
from tests.emulator.conftest import Kubectl, WaitUntil, available_web_deployment, served_crd

Rows = list[dict[str, str]]

AGE = re.compile(r"^\d+s$")
"""The age of anything a test made: seconds."""


def table(output: str) -> tuple[list[str], Rows]:
    """The header and rows of kubectl's output, cells cut at the header's column starts
    (kubectl aligns every column; header names may hold single spaces)."""
    header, *lines = output.rstrip("\n").split("\n")
    spans = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", header)]
    rows = []
    for line in lines:
        cells = {}
        for index, (start, name) in enumerate(spans):
            end = spans[index + 1][0] if index + 1 < len(spans) else None
            cells[name] = line[start:end].strip()
        rows.append(cells)
    return [name for _, name in spans], rows


def by_name(rows: Rows) -> dict[str, dict[str, str]]:
    return {row["NAME"]: row for row in rows}


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [{"name": "lab", "image": "lab:1"}], **spec},
    }


def _running(core_v1: kubernetes.client.CoreV1Api, namespace: str, name: str) -> Any:
    pod = core_v1.read_namespaced_pod(name, namespace)
    statuses = pod.status.container_statuses or []
    return pod if statuses and all(s.ready for s in statuses) else None


def _running_lab(
    core_v1: kubernetes.client.CoreV1Api, namespace: str, wait_until: WaitUntil
) -> Any:
    """A pod ``lab``, once it runs."""
    core_v1.create_namespaced_pod(namespace, _pod("lab"))
    return wait_until(lambda: _running(core_v1, namespace, "lab"))


@pytest.fixture
def node(emulator: KubernetesEmulator) -> str:
    emulator.cluster.add_node("node-1")
    return "node-1"


def test_get_pods_in_all_namespaces(
    kubectl: Kubectl,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    node: str,
    wait_until: WaitUntil,
) -> None:
    core_v1.create_namespace({"metadata": {"name": "other"}})
    core_v1.create_namespaced_pod(namespace, _pod("lab"))
    # Asks for a node no one has: stays Pending.
    core_v1.create_namespaced_pod("other", _pod("waiting", nodeSelector={"disk": "none"}))
    wait_until(lambda: _running(core_v1, namespace, "lab"))

    header, rows = table(kubectl("get", "pods", "-A"))
    assert header == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [{k: v for k, v in row.items() if k != "AGE"} for row in rows] == [
        {
            "NAMESPACE": "other",
            "NAME": "waiting",
            "READY": "0/1",
            "STATUS": "Pending",
            "RESTARTS": "0",
        },
        {"NAMESPACE": "test", "NAME": "lab", "READY": "1/1", "STATUS": "Running", "RESTARTS": "0"},
    ]
    assert all(AGE.match(row["AGE"]) for row in rows)


def test_get_pods_wide(
    kubectl: Kubectl,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    node: str,
    wait_until: WaitUntil,
) -> None:
    pod = _running_lab(core_v1, namespace, wait_until)

    output = kubectl("get", "pods", "-o", "wide", "-n", namespace)
    header, rows = table(output)
    assert header == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ]
    (row,) = rows
    assert row["IP"] == pod.status.pod_ip
    assert (row["NAME"], row["READY"], row["STATUS"], row["NODE"]) == (
        "lab",
        "1/1",
        "Running",
        node,
    )
    assert (row["NOMINATED NODE"], row["READINESS GATES"]) == ("<none>", "<none>")
    # -L and --show-labels read the labels from each row's object.
    header, rows = table(kubectl("get", "pods", "-n", namespace, "-L", "app", "--show-labels"))
    assert header[-2:] == ["APP", "LABELS"]
    assert (rows[0]["APP"], rows[0]["LABELS"]) == ("lab", "app=lab")


def test_get_pods_shows_what_their_containers_are_doing(
    emulator: KubernetesEmulator,
    kubectl: Kubectl,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
) -> None:
    # Pods bound to a node whose kubelet is down keep the status written for them here, as
    # that kubelet last reported it.
    emulator.cluster.add_node("quiet", ready=False)
    finished = "2026-01-01T00:00:00Z"
    statuses: dict[str, dict[str, Any]] = {
        "crashing": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "lab",
                    "image": "lab:1",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"exitCode": 1, "finishedAt": finished}},
                }
            ],
        },
        "initializing": {
            "phase": "Pending",
            "initContainerStatuses": [
                {
                    "name": "setup",
                    "image": "lab:1",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"running": {}},
                }
            ],
        },
        "done": {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": "lab",
                    "image": "lab:1",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                }
            ],
        },
    }
    init = [{"name": "setup", "image": "lab:1"}]
    for name, status in statuses.items():
        spec: dict[str, Any] = {"nodeName": "quiet"}
        if name == "initializing":
            spec["initContainers"] = init
        core_v1.create_namespaced_pod(namespace, _pod(name, **spec))
        core_v1.patch_namespaced_pod_status(name, namespace, {"status": status})

    rows = by_name(table(kubectl("get", "pods", "-n", namespace))[1])
    assert {name: (r["READY"], r["STATUS"]) for name, r in rows.items()} == {
        "crashing": ("0/1", "CrashLoopBackOff"),
        "initializing": ("0/1", "Init:0/1"),
        "done": ("0/1", "Completed"),
    }
    # The restarts, and how long ago the last container ended (in days, here).
    assert re.fullmatch(r"4 \(\d+d ago\)", rows["crashing"]["RESTARTS"])
    assert (rows["initializing"]["RESTARTS"], rows["done"]["RESTARTS"]) == ("0", "0")


@pytest.mark.cluster_settings(pod_termination_seconds=30)
def test_get_pods_shows_a_deleted_pod_terminating(
    kubectl: Kubectl,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    node: str,
    wait_until: WaitUntil,
) -> None:
    _running_lab(core_v1, namespace, wait_until)
    core_v1.delete_namespaced_pod("lab", namespace)

    (row,) = table(kubectl("get", "pods", "-n", namespace))[1]
    assert (row["NAME"], row["STATUS"]) == ("lab", "Terminating")


def test_get_nodes(
    emulator: KubernetesEmulator,
    kubectl: Kubectl,
    core_v1: kubernetes.client.CoreV1Api,
    node: str,
) -> None:
    emulator.cluster.add_node(
        "control", labels={"node-role.kubernetes.io/control-plane": ""}, unschedulable=True
    )
    header, rows = table(kubectl("get", "nodes"))
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [(r["NAME"], r["STATUS"], r["ROLES"], r["VERSION"]) for r in rows] == [
        ("control", "Ready,SchedulingDisabled", "control-plane", "v1.33.0"),
        ("node-1", "Ready", "<none>", "v1.33.0"),
    ]

    header, rows = table(kubectl("get", "nodes", "-o", "wide"))
    assert header[5:] == [
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]
    wide = by_name(rows)[node]
    addresses = core_v1.read_node(node).status.addresses
    internal = next(a.address for a in addresses if a.type == "InternalIP")
    assert (wide["INTERNAL-IP"], wide["EXTERNAL-IP"]) == (internal, "<none>")
    assert wide["OS-IMAGE"] == "Debian GNU/Linux 12 (bookworm)"
    assert (wide["KERNEL-VERSION"], wide["CONTAINER-RUNTIME"]) == (
        "6.1.0-emulated",
        "containerd://1.7.24",
    )


def test_get_namespaces(
    kubectl: Kubectl, core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    header, rows = table(kubectl("get", "namespaces"))
    assert header == ["NAME", "STATUS", "AGE"]
    row = by_name(rows)[namespace]
    assert row["STATUS"] == "Active"
    assert AGE.match(row["AGE"])


def test_get_services(
    kubectl: Kubectl, core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    created = core_v1.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "dask-scheduler"},
            "spec": {
                "selector": {"app": "dask", "role": "scheduler"},
                "ports": [{"name": "comm", "port": 8786}, {"name": "dashboard", "port": 8787}],
            },
        },
    )
    header, rows = table(kubectl("get", "services", "-n", namespace, "-o", "wide"))
    assert header == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"]
    (row,) = rows
    assert row == {
        "NAME": "dask-scheduler",
        "TYPE": "ClusterIP",
        "CLUSTER-IP": created.spec.cluster_ip,
        "EXTERNAL-IP": "<none>",
        "PORT(S)": "8786/TCP,8787/TCP",
        "AGE": row["AGE"],
        "SELECTOR": "app=dask,role=scheduler",
    }
    assert AGE.match(row["AGE"])


def test_get_deployments(
    kubectl: Kubectl,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    node: str,
    wait_until: WaitUntil,
) -> None:
    available_web_deployment(apps_v1, namespace, wait_until, replicas=2)
    header, rows = table(kubectl("get", "deployments", "-n", namespace, "-o", "wide"))
    assert header == [
        "NAME",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "AGE",
        "CONTAINERS",
        "IMAGES",
        "SELECTOR",
    ]
    (row,) = rows
    assert {k: v for k, v in row.items() if k != "AGE"} == {
        "NAME": "web",
        "READY": "2/2",
        "UP-TO-DATE": "2",
        "AVAILABLE": "2",
        "CONTAINERS": "web",
        "IMAGES": "nginx:1.27",
        "SELECTOR": "app=web",
    }

    # `all` is the pods, services and workloads: one table of each kind there is.
    headers, names = [], []
    for block in kubectl("get", "all", "-n", namespace).strip().split("\n\n"):
        header, rows = table(block)
        headers.append(header)
        names.append([row["NAME"].split("-")[0] for row in rows])
    assert names == [["pod/web", "pod/web"], ["deployment.apps/web"], ["replicaset.apps/web"]]
    assert headers[2] == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]


def test_get_events(
    kubectl: Kubectl,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    node: str,
    wait_until: WaitUntil,
) -> None:
    _running_lab(core_v1, namespace, wait_until)
    header, rows = table(kubectl("get", "events", "-n", namespace))
    assert header == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    scheduled = next(row for row in rows if row["REASON"] == "Scheduled")
    assert scheduled == {
        "LAST SEEN": scheduled["LAST SEEN"],
        "TYPE": "Normal",
        "REASON": "Scheduled",
        "OBJECT": "pod/lab",
        "MESSAGE": f"Successfully assigned {namespace}/lab to {node}",
    }
    assert AGE.match(scheduled["LAST SEEN"])
    assert {"Pulled", "Created", "Started"} <= {row["REASON"] for row in rows}


def test_get_custom_resources_with_their_printer_columns(
    emulator: KubernetesEmulator,
    kubectl: Kubectl,
    extensions: kubernetes.client.ApiextensionsV1Api,
    objects: kubernetes.client.CustomObjectsApi,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    served_crd(emulator, extensions, wait_until, "daskclusters")
    containers = [{"name": "dask", "image": "ghcr.io/dask/dask:2026.8.0"}]
    objects.create_namespaced_custom_object(
        "kubernetes.dask.org",
        "v1",
        namespace,
        "daskclusters",
        {
            "apiVersion": "kubernetes.dask.org/v1",
            "kind": "DaskCluster",
            "metadata": {"name": "analysis"},
            "spec": {
                "worker": {"replicas": 3, "spec": {"containers": containers}},
                "scheduler": {
                    "spec": {"containers": containers},
                    "service": {"ports": [{"name": "comm", "port": 8786}]},
                },
            },
        },
    )

    # The status its operator would write (no operator runs here; the CRD has no status
    # subresource, so the operator patches the object itself).
    objects.patch_namespaced_custom_object(
        "kubernetes.dask.org",
        "v1",
        namespace,
        "daskclusters",
        "analysis",
        {"status": {"phase": "Running"}},
    )
    header, rows = table(kubectl("get", "dsk", "-n", namespace))
    assert header == ["NAME", "WORKERS", "STATUS", "AGE"]
    (row,) = rows
    assert (row["NAME"], row["WORKERS"], row["STATUS"]) == ("analysis", "3", "Running")
    assert AGE.match(row["AGE"])

    # CRDs themselves have the server's default columns.
    header, rows = table(kubectl("get", "crd"))
    assert header == ["NAME", "CREATED AT"]
    assert [row["NAME"] for row in rows] == ["daskclusters.kubernetes.dask.org"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rows[0]["CREATED AT"])

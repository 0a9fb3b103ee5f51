"""Create, read, list, replace and delete every served kind through the real client."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kubernetes.client
import pytest
import requests
from kubernetes.client import ApiClient, AppsV1Api, CoreV1Api, NetworkingV1Api, VersionApi
from kubernetes.client.exceptions import ConflictException

from devstack.kube import KubernetesEmulator


def _read_modify_write(
    read: Callable[[], Any], modify: Callable[[Any], None], write: Callable[[Any], Any]
) -> tuple[Any, Any]:
    """(what was read last, what was written): read again and retry on 409, as clients do.

    Controllers (the DaemonSet controller, the scheduler) write the objects they own, so a
    read-modify-write can meet a newer version, exactly as on a real cluster.
    """
    for _ in range(20):
        current = read()
        modify(current)
        try:
            return current, write(current)
        except ConflictException:
            continue
    raise AssertionError("never written without a conflict")


def _pod_spec() -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": "registry.example/lab:1.0"}]}


@dataclass(frozen=True)
class Kind:
    """How to drive one kind through its generated client methods."""

    name: str
    api: str
    snake: str
    namespaced: bool
    body: Callable[[str], dict[str, Any]]
    mutate: Callable[[Any], None]


def _set_label(obj: Any) -> None:
    obj.metadata.labels = {**(obj.metadata.labels or {}), "changed": "yes"}


KINDS = [
    Kind(
        "configmap",
        "core",
        "config_map",
        True,
        lambda n: {"metadata": {"name": n}, "data": {"key": "value"}},
        lambda o: setattr(o, "data", {"key": "other"}),
    ),
    Kind(
        "secret",
        "core",
        "secret",
        True,
        lambda n: {"metadata": {"name": n}, "data": {"token": base64.b64encode(b"t").decode()}},
        _set_label,
    ),
    Kind(
        "service",
        "core",
        "service",
        True,
        lambda n: {"metadata": {"name": n}, "spec": {"ports": [{"port": 80}]}},
        _set_label,
    ),
    Kind(
        "serviceaccount",
        "core",
        "service_account",
        True,
        lambda n: {"metadata": {"name": n}},
        _set_label,
    ),
    Kind(
        "resourcequota",
        "core",
        "resource_quota",
        True,
        lambda n: {"metadata": {"name": n}, "spec": {"hard": {"limits.cpu": "4"}}},
        lambda o: setattr(o.spec, "hard", {"limits.cpu": "8"}),
    ),
    Kind(
        "persistentvolumeclaim",
        "core",
        "persistent_volume_claim",
        True,
        lambda n: {
            "metadata": {"name": n},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
        _set_label,
    ),
    Kind(
        "event",
        "core",
        "event",
        True,
        lambda n: {
            "metadata": {"name": n},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "test"},
            "reason": "Testing",
            "message": "hello",
        },
        lambda o: setattr(o, "message", "changed"),
    ),
    Kind(
        "pod",
        "core",
        "pod",
        True,
        lambda n: {"metadata": {"name": n}, "spec": _pod_spec()},
        _set_label,
    ),
    Kind(
        "daemonset",
        "apps",
        "daemon_set",
        True,
        lambda n: {
            "metadata": {"name": n},
            "spec": {
                "selector": {"matchLabels": {"app": n}},
                "template": {"metadata": {"labels": {"app": n}}, "spec": _pod_spec()},
            },
        },
        _set_label,
    ),
    Kind(
        "networkpolicy",
        "networking",
        "network_policy",
        True,
        lambda n: {
            "metadata": {"name": n},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
        },
        _set_label,
    ),
    Kind("namespace", "core", "namespace", False, lambda n: {"metadata": {"name": n}}, _set_label),
    Kind("node", "core", "node", False, lambda n: {"metadata": {"name": n}}, _set_label),
]


def _api(api_client: ApiClient, kind: Kind) -> Any:
    return {"core": CoreV1Api, "apps": AppsV1Api, "networking": NetworkingV1Api}[kind.api](
        api_client
    )


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_crud_round_trip(api_client: ApiClient, namespace: str, kind: Kind) -> None:
    api = _api(api_client, kind)
    name = f"crud-{kind.name}"
    scoped = (namespace,) if kind.namespaced else ()
    infix = "namespaced_" if kind.namespaced else ""

    def method(verb: str) -> Any:
        return getattr(api, f"{verb}_{infix}{kind.snake}")

    created = method("create")(*scoped, kind.body(name))
    assert created.metadata.name == name
    assert created.metadata.uid
    assert int(created.metadata.resource_version) > 0

    read = method("read")(name, *scoped)
    listed = method("list")(*scoped)
    assert read.metadata.uid == created.metadata.uid
    assert name in [item.metadata.name for item in listed.items]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)

    read, replaced = _read_modify_write(
        lambda: method("read")(name, *scoped),
        kind.mutate,
        lambda body: method("replace")(name, *scoped, body),
    )
    assert replaced.metadata.uid == created.metadata.uid
    assert int(replaced.metadata.resource_version) > int(read.metadata.resource_version)

    method("delete")(name, *scoped, grace_period_seconds=0)
    if kind.name != "namespace":  # a namespace only starts terminating
        with pytest.raises(kubernetes.client.ApiException) as caught:
            method("read")(name, *scoped)
        assert caught.value.status == 404


def test_server_sets_metadata(core_v1: CoreV1Api, namespace: str) -> None:
    created = core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "meta"}})
    assert re.fullmatch(r"[0-9a-f-]{36}", created.metadata.uid)
    assert created.metadata.namespace == namespace
    assert created.metadata.generation == 1
    assert created.metadata.creation_timestamp is not None
    assert created.kind == "ConfigMap" and created.api_version == "v1"
    second = core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "meta2"}})
    assert int(second.metadata.resource_version) > int(created.metadata.resource_version)
    assert second.metadata.uid != created.metadata.uid


def test_generation_counts_spec_changes_only(
    apps_v1: AppsV1Api, core_v1: CoreV1Api, namespace: str
) -> None:
    body = KINDS[8].body("gen")
    created = apps_v1.create_namespaced_daemon_set(namespace, body)
    assert created.metadata.generation == 1
    labelled = apps_v1.patch_namespaced_daemon_set(
        "gen", namespace, {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled.metadata.generation == 1
    respec = apps_v1.patch_namespaced_daemon_set("gen", namespace, {"spec": {"minReadySeconds": 5}})
    assert respec.metadata.generation == 2


def test_generate_name(core_v1: CoreV1Api, namespace: str) -> None:
    names = {
        core_v1.create_namespaced_config_map(
            namespace, {"metadata": {"generateName": "cm-"}}
        ).metadata.name
        for _ in range(5)
    }
    assert len(names) == 5
    for name in names:
        assert re.fullmatch(r"cm-[a-z0-9]{5}", name)


def test_secret_string_data_is_folded_into_data(core_v1: CoreV1Api, namespace: str) -> None:
    created = core_v1.create_namespaced_secret(
        namespace,
        {"metadata": {"name": "s"}, "stringData": {"token": "abc"}, "data": {"other": "eHl6"}},
    )
    assert created.string_data is None
    assert created.data == {"token": base64.b64encode(b"abc").decode(), "other": "eHl6"}
    assert created.type == "Opaque"
    read = core_v1.read_namespaced_secret("s", namespace)
    assert read.string_data is None and read.data["token"] == "YWJj"


def test_namespace_defaults(core_v1: CoreV1Api) -> None:
    created = core_v1.create_namespace({"metadata": {"name": "fresh"}})
    assert created.status.phase == "Active"
    assert created.metadata.labels["kubernetes.io/metadata.name"] == "fresh"


def test_service_defaults(core_v1: CoreV1Api, namespace: str) -> None:
    first = core_v1.create_namespaced_service(
        namespace, {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 8888}]}}
    )
    second = core_v1.create_namespaced_service(
        namespace, {"metadata": {"name": "web2"}, "spec": {"ports": [{"port": 80}]}}
    )
    assert first.spec.type == "ClusterIP"
    assert first.spec.session_affinity == "None"
    assert re.fullmatch(r"10\.(9[6-9]|10[0-9]|11[01])\.\d+\.\d+", first.spec.cluster_ip)
    assert first.spec.cluster_ip != second.spec.cluster_ip
    port = first.spec.ports[0]
    assert port.protocol == "TCP" and port.target_port == 8888
    allocated = first.spec.cluster_ip
    first.metadata.labels = {"x": "y"}
    first.spec.cluster_ip = None
    first.spec.cluster_ips = None
    replaced = core_v1.replace_namespaced_service("web", namespace, first)
    assert replaced.spec.cluster_ip == allocated  # a replace does not reallocate


def test_pod_defaults(core_v1: CoreV1Api, namespace: str) -> None:
    pod = core_v1.create_namespaced_pod(
        namespace, {"metadata": {"name": "p"}, "spec": _pod_spec(), "status": {"phase": "Running"}}
    )
    assert pod.status.phase == "Pending"  # clients cannot create a pod with a status
    assert pod.spec.restart_policy == "Always"
    assert pod.spec.dns_policy == "ClusterFirst"
    assert pod.spec.scheduler_name == "default-scheduler"
    assert pod.spec.termination_grace_period_seconds == 30
    assert pod.spec.containers[0].image_pull_policy == "IfNotPresent"


def test_daemonset_status_counters_deserialize(apps_v1: AppsV1Api, namespace: str) -> None:
    created = apps_v1.create_namespaced_daemon_set(namespace, KINDS[8].body("ds"))
    assert created.status.number_misscheduled == 0
    listed = apps_v1.list_daemon_set_for_all_namespaces()
    assert [d.metadata.name for d in listed.items] == ["ds"]


def test_cluster_wide_lists(core_v1: CoreV1Api) -> None:
    for ns in ("one", "two"):
        core_v1.create_namespace({"metadata": {"name": ns}})
        core_v1.create_namespaced_config_map(ns, {"metadata": {"name": "cm", "labels": {"t": "x"}}})
    listed = core_v1.list_config_map_for_all_namespaces(label_selector="t=x")
    assert sorted(c.metadata.namespace for c in listed.items) == ["one", "two"]
    assert [
        c.metadata.name for c in core_v1.list_namespaced_config_map("one", label_selector="t").items
    ] == ["cm"]


def test_list_pagination(core_v1: CoreV1Api, namespace: str) -> None:
    for i in range(7):
        core_v1.create_namespaced_config_map(
            namespace, {"metadata": {"name": f"page-{i}", "labels": {"p": "1"}}}
        )
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = core_v1.list_namespaced_config_map(
            namespace, label_selector="p=1", limit=3, _continue=token
        )
        pages += 1
        seen.extend(c.metadata.name for c in page.items)
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 7 - len(seen)
    assert pages == 3
    assert seen == [f"page-{i}" for i in range(7)]


def test_pod_status_subresource(core_v1: CoreV1Api, namespace: str) -> None:
    # A scheduler nobody runs: no controller writes this pod's status, so the test's own
    # read-modify-write cannot meet a newer version (the scheduler's write made it a 409).
    spec = {**_pod_spec(), "schedulerName": "no-such-scheduler"}
    core_v1.create_namespaced_pod(namespace, {"metadata": {"name": "st"}, "spec": spec})
    status = core_v1.read_namespaced_pod_status("st", namespace)
    status.status.phase = "Running"
    status.metadata.labels = {"ignored": "yes"}
    replaced = core_v1.replace_namespaced_pod_status("st", namespace, status)
    assert replaced.status.phase == "Running"
    assert not replaced.metadata.labels  # the status subresource changes nothing else
    patched = core_v1.patch_namespaced_pod_status("st", namespace, {"status": {"message": "hello"}})
    assert patched.status.message == "hello" and patched.status.phase == "Running"
    # and the main resource cannot change the status
    patched_main = core_v1.patch_namespaced_pod("st", namespace, {"status": {"phase": "Failed"}})
    assert patched_main.status.phase == "Running"


def test_node_and_daemonset_status(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, apps_v1: AppsV1Api, namespace: str
) -> None:
    emulator.cluster.add_node("worker")
    node = core_v1.patch_node_status(
        "worker", {"status": {"images": [{"names": ["extra:1"], "sizeBytes": 5}]}}
    )
    assert ["extra:1"] in [image.names for image in node.status.images]
    assert core_v1.read_node_status("worker").metadata.name == "worker"
    apps_v1.create_namespaced_daemon_set(namespace, KINDS[8].body("dss"))

    def observe(ds: Any) -> None:
        ds.status.observed_generation = 7

    _, written = _read_modify_write(
        lambda: apps_v1.read_namespaced_daemon_set_status("dss", namespace),
        observe,
        lambda ds: apps_v1.replace_namespaced_daemon_set_status("dss", namespace, ds),
    )
    assert written.status.observed_generation == 7


def test_discovery(api_client: ApiClient) -> None:
    assert VersionApi(api_client).get_code().git_version.startswith("v1.")
    core = kubernetes.client.CoreApi(api_client).get_api_versions()
    assert core.versions == ["v1"]
    groups = kubernetes.client.ApisApi(api_client).get_api_versions()
    assert {"apps", "networking.k8s.io"} <= {g.name for g in groups.groups}
    resources = CoreV1Api(api_client).get_api_resources()
    names = {r.name for r in resources.resources}
    assert {"pods", "pods/status", "namespaces", "configmaps", "events", "nodes"} <= names
    apps = AppsV1Api(api_client).get_api_resources()
    assert "daemonsets" in {r.name for r in apps.resources}
    networking = NetworkingV1Api(api_client).get_api_resources()
    assert "networkpolicies" in {r.name for r in networking.resources}


def test_unknown_paths_are_404_status(emulator: KubernetesEmulator) -> None:
    for path in (
        "/api/v1/widgets",
        "/apis/batch/v1/cronjobs",
        "/nothing",
        "/api/v1/namespaces/x/nodes",
    ):
        response = requests.get(emulator.url + path, timeout=5)
        assert response.status_code == 404
        body = response.json()
        assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == 404


def test_dry_run_persists_nothing(core_v1: CoreV1Api, namespace: str) -> None:
    created = core_v1.create_namespaced_config_map(
        namespace, {"metadata": {"name": "dry"}}, dry_run="All"
    )
    assert created.metadata.name == "dry"
    assert (
        core_v1.list_namespaced_config_map(namespace, field_selector="metadata.name=dry").items
        == []
    )

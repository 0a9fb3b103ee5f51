"""The audit log records every HTTP request in Kubernetes terms, and nothing else."""

from __future__ import annotations

import contextlib
import time

import requests
from kubernetes.client import ApiException, AppsV1Api, CoreV1Api

from devstack.kube import KubernetesEmulator
from devstack.kube.audit import AuditLog


def _summary(emulator: KubernetesEmulator) -> list[tuple[str, str, str, str, str, int]]:
    return [
        (e.verb, e.resource, e.subresource, e.namespace, e.name, e.code)
        for e in emulator.audit.entries()
    ]


def test_every_verb_is_recorded(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str
) -> None:
    emulator.audit.clear()
    core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    core_v1.read_namespaced_config_map("a", namespace)
    core_v1.list_namespaced_config_map(namespace)
    core_v1.list_config_map_for_all_namespaces()
    core_v1.replace_namespaced_config_map("a", namespace, {"metadata": {"name": "a"}})
    core_v1.patch_namespaced_config_map("a", namespace, {"data": {"x": "y"}})
    core_v1.delete_namespaced_config_map("a", namespace)
    core_v1.delete_collection_namespaced_config_map(namespace)
    requests.get(
        f"{emulator.url}/api/v1/namespaces/{namespace}/configmaps?watch=1&timeoutSeconds=0.01",
        timeout=5,
    )
    assert _summary(emulator) == [
        ("create", "configmaps", "", namespace, "", 201),
        ("get", "configmaps", "", namespace, "a", 200),
        ("list", "configmaps", "", namespace, "", 200),
        ("list", "configmaps", "", "", "", 200),
        ("update", "configmaps", "", namespace, "a", 200),
        ("patch", "configmaps", "", namespace, "a", 200),
        ("delete", "configmaps", "", namespace, "a", 200),
        ("deletecollection", "configmaps", "", namespace, "", 200),
        ("watch", "configmaps", "", namespace, "", 200),
    ]


def test_groups_subresources_failures_and_user_agent(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, apps_v1: AppsV1Api, namespace: str
) -> None:
    emulator.audit.clear()
    apps_v1.list_namespaced_daemon_set(namespace)
    core_v1.api_client.user_agent = "audit-test/1.0"
    with contextlib.suppress(ApiException):
        core_v1.read_namespaced_pod_status("missing", namespace)
    ds, status = emulator.audit.entries()
    assert (ds.api_group, ds.api_version, ds.resource, ds.verb) == (
        "apps",
        "v1",
        "daemonsets",
        "list",
    )
    assert (status.resource, status.subresource, status.code) == ("pods", "status", 404)
    assert status.user_agent == "audit-test/1.0"
    assert emulator.audit.entries(code=404) == [status]
    assert emulator.audit.entries(verb="list", resource="daemonsets") == [ds]


def test_cluster_writes_and_control_calls_are_not_audited(
    emulator: KubernetesEmulator, namespace: str
) -> None:
    emulator.audit.clear()
    emulator.store.create("configmaps", {"metadata": {"name": "quiet", "namespace": namespace}})
    emulator.cluster.add_node("silent")
    requests.get(f"{emulator.url}/_emulator/audit", timeout=5)
    assert emulator.audit.entries() == []


def test_audit_over_http(emulator: KubernetesEmulator, core_v1: CoreV1Api) -> None:
    emulator.audit.clear()
    core_v1.list_namespace()
    entries = requests.get(f"{emulator.url}/_emulator/audit", timeout=5).json()["entries"]
    assert [(e["verb"], e["resource"]) for e in entries] == [("list", "namespaces")]
    assert requests.delete(f"{emulator.url}/_emulator/audit", timeout=5).status_code == 200
    assert emulator.audit.entries() == []


def test_audit_entries_time_the_emulator_s_own_handling(
    emulator: KubernetesEmulator, core_v1: CoreV1Api
) -> None:
    emulator.audit.clear()
    before = time.time()
    core_v1.list_namespace()
    after = time.time()
    (entry,) = emulator.audit.entries()
    assert before <= entry.started <= entry.timestamp <= after


def test_audit_log_is_bounded() -> None:
    from devstack.kube.audit import AuditEntry

    log = AuditLog(capacity=3)
    for i in range(10):
        log.record(AuditEntry("get", "", "v1", "pods", "", "ns", f"p{i}", 200, "", "/", 0.0))
    assert [e.name for e in log.entries()] == ["p7", "p8", "p9"]

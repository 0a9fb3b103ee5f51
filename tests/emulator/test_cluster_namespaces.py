"""The namespace controller: default ServiceAccount on creation, contents removed on deletion."""

from __future__ import annotations

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from devstack.kube import KubernetesEmulator

from .conftest import WaitUntil


def _exists(read: object, *args: str) -> bool:
    try:
        read(*args)  # type: ignore[operator]
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


@pytest.mark.cluster_settings(service_account_delay_seconds=0.3)
def test_default_service_account_appears_shortly_after_the_namespace(
    core_v1: kubernetes.client.CoreV1Api, wait_until: WaitUntil
) -> None:
    core_v1.create_namespace({"metadata": {"name": "fresh"}})

    assert core_v1.list_namespaced_service_account("fresh").items == []
    accounts = wait_until(lambda: core_v1.list_namespaced_service_account("fresh").items)
    assert [a.metadata.name for a in accounts] == ["default"]
    ca = core_v1.read_namespaced_config_map("kube-root-ca.crt", "fresh")
    assert ca.data["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")


@pytest.mark.cluster_settings(namespace_termination_seconds=0.3)
def test_namespace_termination_removes_contents_then_itself(
    emulator: KubernetesEmulator, core_v1: kubernetes.client.CoreV1Api, wait_until: WaitUntil
) -> None:
    emulator.cluster.add_node("node-1")
    core_v1.create_namespace({"metadata": {"name": "doomed"}})
    core_v1.create_namespaced_config_map("doomed", {"metadata": {"name": "env"}, "data": {}})
    core_v1.create_namespaced_secret("doomed", {"metadata": {"name": "token"}})
    pod = {"metadata": {"name": "lab"}, "spec": {"containers": [{"name": "c", "image": "lab:1"}]}}
    core_v1.create_namespaced_pod("doomed", pod)
    wait_until(lambda: core_v1.read_namespaced_pod("lab", "doomed").status.phase == "Running")
    wait_until(lambda: core_v1.list_namespaced_service_account("doomed").items)

    core_v1.delete_namespace("doomed")

    namespace = core_v1.read_namespace("doomed")
    assert namespace.status.phase == "Terminating"
    assert namespace.metadata.deletion_timestamp is not None
    assert _exists(core_v1.read_namespaced_config_map, "env", "doomed")
    wait_until(lambda: not _exists(core_v1.read_namespace, "doomed"))
    assert emulator.store.list("pods", "doomed") == []
    assert emulator.store.list("configmaps", "doomed") == []
    assert emulator.store.list("secrets", "doomed") == []
    assert emulator.store.list("serviceaccounts", "doomed") == []
    assert emulator.store.list("events", "doomed") == []


@pytest.mark.cluster_settings(namespace_termination_seconds=0.05)
def test_an_object_with_finalizers_holds_its_namespace_until_they_are_removed(
    emulator: KubernetesEmulator, core_v1: kubernetes.client.CoreV1Api, wait_until: WaitUntil
) -> None:
    """As kube-apiserver's namespace controller does: the held object is marked deleted, not
    removed, so the operator that holds it sees the mark and lets it go; the namespace is
    Terminating until then, and its other contents are gone already."""
    core_v1.create_namespace({"metadata": {"name": "held"}})
    core_v1.create_namespaced_config_map(
        "held", {"metadata": {"name": "cluster", "finalizers": ["example.com/operator"]}}
    )
    core_v1.create_namespaced_config_map("held", {"metadata": {"name": "plain"}})

    core_v1.delete_namespace("held")

    marked = wait_until(
        lambda: core_v1.read_namespaced_config_map("cluster", "held").metadata.deletion_timestamp
    )
    assert marked is not None
    wait_until(lambda: not _exists(core_v1.read_namespaced_config_map, "plain", "held"))
    assert core_v1.read_namespace("held").status.phase == "Terminating"

    core_v1.patch_namespaced_config_map("cluster", "held", {"metadata": {"finalizers": None}})

    wait_until(lambda: not _exists(core_v1.read_namespace, "held"))
    assert emulator.store.list("configmaps", "held") == []


def test_recreated_namespace_gets_a_new_default_service_account(
    core_v1: kubernetes.client.CoreV1Api, wait_until: WaitUntil
) -> None:
    core_v1.create_namespace({"metadata": {"name": "again"}})
    first = wait_until(lambda: core_v1.list_namespaced_service_account("again").items)[0]
    core_v1.delete_namespace("again")
    wait_until(lambda: not _exists(core_v1.read_namespace, "again"))

    core_v1.create_namespace({"metadata": {"name": "again"}})
    second = wait_until(lambda: core_v1.list_namespaced_service_account("again").items)[0]
    assert second.metadata.uid != first.metadata.uid

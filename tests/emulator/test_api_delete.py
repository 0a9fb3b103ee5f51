"""Deletion: graceful for pods and namespaces, immediate for everything else."""

from __future__ import annotations

import json

import kubernetes.client
import pytest
from kubernetes.client import CoreV1Api

from devstack.kube import KubernetesEmulator
from tests.emulator.conftest import WaitUntil

# The simulated kubelet would otherwise finish a graceful deletion at once.
SLOW_KUBELET = pytest.mark.cluster_settings(pod_termination_seconds=60)


def _running_pod(
    emulator: KubernetesEmulator,
    core_v1: CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
    **spec: int,
) -> None:
    emulator.cluster.add_node("worker")
    body = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "lab:1"}], **spec},
    }
    core_v1.create_namespaced_pod(namespace, body)
    wait_until(lambda: core_v1.read_namespaced_pod("p", namespace).spec.node_name)


@SLOW_KUBELET
def test_pod_delete_is_graceful(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    _running_pod(emulator, core_v1, namespace, wait_until)
    deleted = core_v1.delete_namespaced_pod("p", namespace)
    assert deleted.metadata.deletion_timestamp is not None
    assert deleted.metadata.deletion_grace_period_seconds == 30
    still_there = core_v1.read_namespaced_pod("p", namespace)
    assert still_there.metadata.deletion_timestamp is not None
    again = core_v1.delete_namespaced_pod("p", namespace)  # a second delete is fine
    assert again.metadata.uid == deleted.metadata.uid


@SLOW_KUBELET
def test_pod_grace_period_from_request_and_spec(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    _running_pod(emulator, core_v1, namespace, wait_until, terminationGracePeriodSeconds=12)
    assert (
        core_v1.delete_namespaced_pod("p", namespace).metadata.deletion_grace_period_seconds == 12
    )


@SLOW_KUBELET
def test_pod_grace_period_in_body(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    _running_pod(emulator, core_v1, namespace, wait_until)
    deleted = core_v1.delete_namespaced_pod("p", namespace, body={"gracePeriodSeconds": 5})
    assert deleted.metadata.deletion_grace_period_seconds == 5


@SLOW_KUBELET
def test_pod_delete_with_zero_grace_is_immediate(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    _running_pod(emulator, core_v1, namespace, wait_until)
    core_v1.delete_namespaced_pod("p", namespace)
    core_v1.delete_namespaced_pod("p", namespace, grace_period_seconds=0)
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core_v1.read_namespaced_pod("p", namespace)
    assert caught.value.status == 404


def test_unscheduled_pod_is_deleted_at_once(core_v1: CoreV1Api, namespace: str) -> None:
    body = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    core_v1.create_namespaced_pod(namespace, body)
    core_v1.delete_namespaced_pod("p", namespace)
    assert core_v1.list_namespaced_pod(namespace).items == []


def test_kubelet_finishes_graceful_deletion(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    _running_pod(emulator, core_v1, namespace, wait_until)
    core_v1.delete_namespaced_pod("p", namespace)
    wait_until(lambda: not core_v1.list_namespaced_pod(namespace).items)


@pytest.mark.cluster_settings(namespace_termination_seconds=60)
def test_namespace_delete_marks_it_terminating(core_v1: CoreV1Api, namespace: str) -> None:
    core_v1.delete_namespace(namespace)
    ns = core_v1.read_namespace(namespace)
    assert ns.status.phase == "Terminating"
    assert ns.metadata.deletion_timestamp is not None
    # deleting again is harmless and returns the namespace
    core_v1.delete_namespace(namespace)
    assert core_v1.read_namespace(namespace).status.phase == "Terminating"


def test_namespace_controller_finishes_deletion(
    core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "content"}})
    core_v1.delete_namespace(namespace)
    wait_until(lambda: namespace not in [n.metadata.name for n in core_v1.list_namespace().items])
    assert (
        core_v1.list_config_map_for_all_namespaces(field_selector="metadata.name=content").items
        == []
    )


def test_plain_delete_returns_status_or_object(core_v1: CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "cm"}})
    status = core_v1.delete_namespaced_config_map("cm", namespace)
    assert status["kind"] == "Status" and status["status"] == "Success"
    assert status["details"]["name"] == "cm" and status["details"]["kind"] == "configmaps"
    core_v1.create_namespaced_service(
        namespace, {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 1}]}}
    )
    service = core_v1.delete_namespaced_service("svc", namespace)
    assert service.metadata.name == "svc"
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core_v1.delete_namespaced_service("svc", namespace)
    assert caught.value.status == 404


def test_delete_preconditions(core_v1: CoreV1Api, namespace: str) -> None:
    created = core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "pre"}})
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core_v1.delete_namespaced_config_map(
            "pre",
            namespace,
            body={"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}},
        )
    assert caught.value.status == 409
    core_v1.delete_namespaced_config_map(
        "pre", namespace, body={"preconditions": {"uid": created.metadata.uid}}
    )
    assert (
        core_v1.list_namespaced_config_map(namespace, field_selector="metadata.name=pre").items
        == []
    )


def test_delete_collection(core_v1: CoreV1Api, namespace: str) -> None:
    for name, group in (("a", "x"), ("b", "x"), ("c", "y")):
        core_v1.create_namespaced_config_map(
            namespace, {"metadata": {"name": name, "labels": {"g": group}}}
        )
    answer = core_v1.delete_collection_namespaced_config_map(
        namespace, label_selector="g=x", _preload_content=False
    )
    # The list deleted, as kube-apiserver's generic store answers.
    deleted = json.loads(answer.data)
    assert deleted["kind"] == "ConfigMapList"
    assert sorted(item["metadata"]["name"] for item in deleted["items"]) == ["a", "b"]
    remaining = core_v1.list_namespaced_config_map(namespace, label_selector="g").items
    assert [c.metadata.name for c in remaining] == ["c"]


def _config_map(name: str, **meta: object) -> dict[str, object]:
    return {"metadata": {"name": name, **meta}, "data": {"k": "v"}}


def test_finalizers_hold_a_deletion_until_the_last_is_removed(
    core_v1: CoreV1Api, namespace: str
) -> None:
    """As kopf's finalizer holds a DaskCluster: DELETE marks the object, which stays readable;
    no finalizer may be added while it is being deleted; removing the last one deletes it."""
    core_v1.create_namespaced_config_map(
        namespace, _config_map("held", finalizers=["example.com/hold"])
    )
    core_v1.delete_namespaced_config_map("held", namespace)
    marked = core_v1.read_namespaced_config_map("held", namespace)
    assert marked.metadata.deletion_timestamp is not None
    assert marked.metadata.finalizers == ["example.com/hold"]
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core_v1.patch_namespaced_config_map(
            "held", namespace, {"metadata": {"finalizers": ["example.com/hold", "other/x"]}}
        )
    assert refused.value.status == 422
    assert "no new finalizers can be added" in str(refused.value.body)
    core_v1.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}})
    with pytest.raises(kubernetes.client.ApiException) as gone:
        core_v1.read_namespaced_config_map("held", namespace)
    assert gone.value.status == 404


def test_the_garbage_collector_follows_owner_references_of_any_kind(
    core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    """Dependents go with their owner whatever their kinds; one with another owner left only
    loses the reference to the one that went."""
    owner = core_v1.create_namespaced_config_map(namespace, _config_map("owner"))
    other = core_v1.create_namespaced_config_map(namespace, _config_map("other"))

    def reference(obj: kubernetes.client.V1ConfigMap) -> dict[str, object]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": obj.metadata.name,
            "uid": obj.metadata.uid,
        }

    core_v1.create_namespaced_secret(
        namespace, {"metadata": {"name": "owned", "ownerReferences": [reference(owner)]}}
    )
    core_v1.create_namespaced_config_map(
        namespace,
        _config_map("shared", ownerReferences=[reference(owner), reference(other)]),
    )
    core_v1.delete_namespaced_config_map("owner", namespace)

    def secret_gone() -> bool:
        return not [
            s for s in core_v1.list_namespaced_secret(namespace).items if s.metadata.name == "owned"
        ]

    wait_until(secret_gone)
    wait_until(
        lambda: (
            [
                r.name
                for r in core_v1.read_namespaced_config_map(
                    "shared", namespace
                ).metadata.owner_references
            ]
            == ["other"]
        )
    )


def _reference(kind: str, name: str, uid: str, api_version: str = "v1") -> dict[str, str]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}


def _config_map_names(core_v1: CoreV1Api, namespace: str) -> set[str]:
    """The test's ConfigMaps in ``namespace`` (not the CA bundle every namespace gets)."""
    items = core_v1.list_namespaced_config_map(namespace).items
    return {c.metadata.name for c in items} - {"kube-root-ca.crt"}


def test_the_garbage_collector_leaves_a_dependent_with_finalizers_to_whoever_set_them(
    core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    """Background propagation deletes a dependent as a DELETE call does: one an operator's
    finalizer holds is marked, and goes when the operator removes the finalizer."""
    owner = core_v1.create_namespaced_config_map(namespace, _config_map("owner"))
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner.metadata.uid,
    }
    core_v1.create_namespaced_config_map(
        namespace,
        _config_map("group", ownerReferences=[reference], finalizers=["example.com/operator"]),
    )

    core_v1.delete_namespaced_config_map("owner", namespace)

    marked = wait_until(
        lambda: core_v1.read_namespaced_config_map("group", namespace).metadata.deletion_timestamp
    )
    assert marked is not None
    core_v1.patch_namespaced_config_map("group", namespace, {"metadata": {"finalizers": None}})
    with pytest.raises(kubernetes.client.ApiException) as gone:
        core_v1.read_namespaced_config_map("group", namespace)
    assert gone.value.status == 404


def test_a_cluster_scoped_owner_takes_its_dependents_in_every_namespace(
    core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    rbac = kubernetes.client.RbacAuthorizationV1Api(core_v1.api_client)
    role = rbac.create_cluster_role({"metadata": {"name": "owner"}, "rules": []})
    owner = _reference("ClusterRole", "owner", role.metadata.uid, "rbac.authorization.k8s.io/v1")
    core_v1.create_namespace({"metadata": {"name": "elsewhere"}})
    for where in (namespace, "elsewhere"):
        core_v1.create_namespaced_config_map(where, _config_map("owned", ownerReferences=[owner]))
        core_v1.create_namespaced_config_map(where, _config_map("unowned"))

    rbac.delete_cluster_role("owner")

    for where in (namespace, "elsewhere"):
        wait_until(lambda where=where: _config_map_names(core_v1, where) == {"unowned"})


def test_an_object_made_after_its_owner_went_is_collected(
    core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    """An operator that makes a dependent while its owner is being deleted leaves one whose
    owner is already gone; the collector deletes it as it would have with the owner."""
    owner = core_v1.create_namespaced_config_map(namespace, _config_map("owner"))
    reference = _reference("ConfigMap", "owner", owner.metadata.uid)
    core_v1.delete_namespaced_config_map("owner", namespace)
    wait_until(lambda: _config_map_names(core_v1, namespace) == set())

    core_v1.create_namespaced_config_map(
        namespace, _config_map("late", ownerReferences=[reference])
    )
    core_v1.create_namespaced_config_map(namespace, _config_map("unowned"))

    wait_until(lambda: _config_map_names(core_v1, namespace) == {"unowned"})


def test_a_namespaced_owner_has_no_dependents_in_another_namespace(
    core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    """A reference across namespaces is not ownership (a real cluster reports it as an
    invalid owner reference and deletes nothing for it)."""
    owner = core_v1.create_namespaced_config_map(namespace, _config_map("owner"))
    reference = _reference("ConfigMap", "owner", owner.metadata.uid)
    core_v1.create_namespace({"metadata": {"name": "elsewhere"}})
    core_v1.create_namespaced_config_map(
        "elsewhere", _config_map("across", ownerReferences=[reference])
    )
    core_v1.create_namespaced_config_map(
        namespace, _config_map("owned", ownerReferences=[reference])
    )

    core_v1.delete_namespaced_config_map("owner", namespace)

    # The collector has handled the owner's deletion once its own namespace's dependent is gone.
    wait_until(lambda: _config_map_names(core_v1, namespace) == set())
    assert _config_map_names(core_v1, "elsewhere") == {"across"}

"""The scheduler: placement rules, and what a pod that fits nowhere shows."""

from __future__ import annotations

from typing import Any

import kubernetes.client
import pytest

from devstack.kube import KubernetesEmulator
from devstack.kube.cluster.placement import tolerates

from .conftest import WaitUntil


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "lab:1"}], **spec},
    }


def _node_of(core_v1: kubernetes.client.CoreV1Api, namespace: str, name: str) -> str | None:
    node: str | None = core_v1.read_namespaced_pod(name, namespace).spec.node_name
    return node


def _unschedulable(core_v1: kubernetes.client.CoreV1Api, namespace: str, name: str) -> Any:
    for condition in core_v1.read_namespaced_pod(name, namespace).status.conditions or []:
        if condition.type == "PodScheduled" and condition.status == "False":
            return condition
    return None


def _events(core_v1: kubernetes.client.CoreV1Api, namespace: str, pod: str) -> list[Any]:
    events = core_v1.list_namespaced_event(namespace).items
    return [e for e in events if e.involved_object.name == pod]


def test_pod_is_scheduled_and_reported(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")
    core_v1.create_namespaced_pod(namespace, _pod("lab"))

    assert wait_until(lambda: _node_of(core_v1, namespace, "lab")) == "node-1"
    pod = core_v1.read_namespaced_pod("lab", namespace)
    scheduled = [c for c in pod.status.conditions if c.type == "PodScheduled"]
    assert scheduled[0].status == "True"
    event = wait_until(
        lambda: [e for e in _events(core_v1, namespace, "lab") if e.reason == "Scheduled"]
    )[0]
    assert event.message == f"Successfully assigned {namespace}/lab to node-1"
    assert event.source.component == "default-scheduler"
    assert event.involved_object.kind == "Pod"
    assert event.involved_object.uid == pod.metadata.uid
    assert event.type == "Normal"
    assert event.metadata.name.startswith("lab.")


def test_pod_with_node_name_runs_there_without_the_scheduler(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    for name in ("node-1", "node-2", "node-3"):
        emulator.cluster.add_node(name)
    core_v1.create_namespaced_pod(namespace, _pod("pinned", nodeName="node-3"))

    wait_until(lambda: core_v1.read_namespaced_pod("pinned", namespace).status.phase == "Running")
    assert _node_of(core_v1, namespace, "pinned") == "node-3"
    assert not [e for e in _events(core_v1, namespace, "pinned") if e.reason == "Scheduled"]


def test_node_selector_and_tolerations_choose_the_node(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    cluster = emulator.cluster
    cluster.add_node("plain")
    cluster.add_node("labelled", labels={"pool": "labs"})
    gpu_taint = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}
    cluster.add_node("tainted", labels={"pool": "labs"}, taints=[gpu_taint])

    core_v1.create_namespaced_pod(namespace, _pod("selected", nodeSelector={"pool": "labs"}))
    equal = [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]
    core_v1.create_namespaced_pod(
        namespace,
        _pod(
            "tolerant",
            tolerations=equal,
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": ["tainted"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            },
        ),
    )
    core_v1.create_namespaced_pod(
        namespace,
        _pod(
            "tolerates-all",
            tolerations=[{"operator": "Exists"}],
            nodeSelector={"pool": "labs"},
        ),
    )

    assert wait_until(lambda: _node_of(core_v1, namespace, "selected")) == "labelled"
    assert wait_until(lambda: _node_of(core_v1, namespace, "tolerant")) == "tainted"
    assert wait_until(lambda: _node_of(core_v1, namespace, "tolerates-all")) in (
        "labelled",
        "tainted",
    )


def test_wrong_toleration_value_leaves_pod_pending_with_the_scheduler_message(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    cluster = emulator.cluster
    cluster.add_node("tainted", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    cluster.add_node("other-1", labels={"pool": "other"})
    cluster.add_node("other-2", labels={"pool": "other"})
    tolerations = [{"key": "gpu", "operator": "Equal", "value": "no", "effect": "NoSchedule"}]
    core_v1.create_namespaced_pod(
        namespace, _pod("stuck", tolerations=tolerations, nodeSelector={"pool": "labs"})
    )

    condition = wait_until(lambda: _unschedulable(core_v1, namespace, "stuck"))
    assert condition.reason == "Unschedulable"
    assert condition.message.startswith(
        "0/3 nodes are available: 1 node(s) had untolerated taint {gpu: yes}, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
    assert core_v1.read_namespaced_pod("stuck", namespace).status.phase == "Pending"
    warning = wait_until(
        lambda: [e for e in _events(core_v1, namespace, "stuck") if e.reason == "FailedScheduling"]
    )[0]
    assert warning.type == "Warning"
    assert warning.message == condition.message


def test_cordoned_and_not_ready_nodes_are_skipped_until_a_node_fits(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    cluster = emulator.cluster
    cluster.add_node("cordoned", unschedulable=True)
    cluster.add_node("sick", ready=False)
    core_v1.create_namespaced_pod(namespace, _pod("waiting"))

    condition = wait_until(lambda: _unschedulable(core_v1, namespace, "waiting"))
    assert "1 node(s) were unschedulable" in condition.message
    assert "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }" in condition.message

    cluster.set_node_ready("sick", True)
    assert wait_until(lambda: _node_of(core_v1, namespace, "waiting")) == "sick"


def test_pending_pod_is_scheduled_when_a_node_is_added(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    core_v1.create_namespaced_pod(namespace, _pod("early"))
    condition = wait_until(lambda: _unschedulable(core_v1, namespace, "early"))
    assert condition.message == "no nodes available to schedule pods"

    emulator.cluster.add_node("late")
    assert wait_until(lambda: _node_of(core_v1, namespace, "early")) == "late"


def test_requests_must_fit_the_remaining_allocatable(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")  # 7800m CPU allocatable
    big = {"requests": {"cpu": "5", "memory": "1Gi"}}
    first = _pod("first")
    first["spec"]["containers"][0]["resources"] = big
    second = _pod("second")
    second["spec"]["containers"][0]["resources"] = big
    core_v1.create_namespaced_pod(namespace, first)
    wait_until(lambda: _node_of(core_v1, namespace, "first"))
    core_v1.create_namespaced_pod(namespace, second)

    condition = wait_until(lambda: _unschedulable(core_v1, namespace, "second"))
    assert "1 Insufficient cpu" in condition.message

    core_v1.delete_namespaced_pod("first", namespace, grace_period_seconds=0)
    assert wait_until(lambda: _node_of(core_v1, namespace, "second")) == "node-1"


def test_unschedulable_fault_blocks_matching_pods_until_cleared(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")
    emulator.cluster.faults.set(
        "unschedulable", f"{namespace}/blocked-*", "0/1 nodes are available: 1 Insufficient memory."
    )
    core_v1.create_namespaced_pod(namespace, _pod("blocked-lab"))
    core_v1.create_namespaced_pod(namespace, _pod("free-lab"))

    condition = wait_until(lambda: _unschedulable(core_v1, namespace, "blocked-lab"))
    assert condition.message == "0/1 nodes are available: 1 Insufficient memory."
    assert wait_until(lambda: _node_of(core_v1, namespace, "free-lab")) == "node-1"

    emulator.cluster.faults.clear()
    assert wait_until(lambda: _node_of(core_v1, namespace, "blocked-lab")) == "node-1"


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "k", "operator": "Exists"}, True),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "k", "value": "v"}, True),
        ({"key": "k", "value": "w"}, False),
        ({"operator": "Exists"}, True),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_toleration_matching(toleration: dict[str, str], tolerated: bool) -> None:
    assert tolerates([toleration], {"key": "k", "value": "v", "effect": "NoSchedule"}) is tolerated

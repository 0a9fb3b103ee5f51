"""The DaemonSet controller: a pod per eligible node, following nodes as they come and go."""

from __future__ import annotations

from typing import Any

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from devstack.kube import KubernetesEmulator

from .conftest import WaitUntil


def _daemonset(name: str, **spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "puller", "image": "lab:1"}], **spec},
            },
        },
    }


def _pods_by_node(core_v1: kubernetes.client.CoreV1Api, namespace: str, app: str) -> dict[str, Any]:
    pods = core_v1.list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return {p.spec.node_name: p for p in pods if p.spec.node_name}


def _status(apps_v1: kubernetes.client.AppsV1Api, namespace: str, name: str) -> Any:
    return apps_v1.read_namespaced_daemon_set(name, namespace).status


def _settled(apps_v1: kubernetes.client.AppsV1Api, namespace: str, name: str, count: int) -> Any:
    status = _status(apps_v1, namespace, name)
    if status is None or status.desired_number_scheduled != count:
        return None
    return status.number_ready == count and status


def test_daemonset_runs_on_every_eligible_node(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    cluster = emulator.cluster
    cluster.add_node("worker-1", labels={"role": "lab"})
    cluster.add_node("worker-2", labels={"role": "lab"})
    cluster.add_node("other", labels={"role": "infra"})
    cluster.add_node(
        "tainted", labels={"role": "lab"}, taints=[{"key": "x", "effect": "NoSchedule"}]
    )
    cluster.add_node("cordoned", labels={"role": "lab"}, unschedulable=True)
    cluster.add_node("sick", labels={"role": "lab"}, ready=False)
    apps_v1.create_namespaced_daemon_set(
        namespace, _daemonset("prepull", nodeSelector={"role": "lab"})
    )

    status = wait_until(lambda: _settled(apps_v1, namespace, "prepull", 2))
    assert status.current_number_scheduled == 2
    assert status.number_available == 2
    assert status.updated_number_scheduled == 2
    assert status.number_misscheduled == 0
    assert status.observed_generation == 1
    pods = _pods_by_node(core_v1, namespace, "prepull")
    assert sorted(pods) == ["worker-1", "worker-2"]
    for node, pod in pods.items():
        assert pod.metadata.name.startswith("prepull-")
        assert len(pod.metadata.name) == len("prepull-") + 5
        owner = pod.metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.controller) == ("DaemonSet", "prepull", True)
        terms = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
        assert terms.node_selector_terms[0].match_fields[0].values == [node]
        assert pod.status.phase == "Running"


def test_daemonset_follows_nodes_added_and_removed(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    cluster = emulator.cluster
    cluster.add_node("node-1")
    apps_v1.create_namespaced_daemon_set(namespace, _daemonset("agent"))
    wait_until(lambda: _settled(apps_v1, namespace, "agent", 1))

    cluster.add_node("node-2")
    wait_until(lambda: _settled(apps_v1, namespace, "agent", 2))
    assert sorted(_pods_by_node(core_v1, namespace, "agent")) == ["node-1", "node-2"]

    core_v1.delete_node("node-1")
    wait_until(lambda: _settled(apps_v1, namespace, "agent", 1))
    assert sorted(_pods_by_node(core_v1, namespace, "agent")) == ["node-2"]


def test_deleting_the_daemonset_deletes_its_pods(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")
    emulator.cluster.add_node("node-2")
    apps_v1.create_namespaced_daemon_set(namespace, _daemonset("agent"))
    wait_until(lambda: _settled(apps_v1, namespace, "agent", 2))
    unrelated = {
        "metadata": {"name": "lab"},
        "spec": {"containers": [{"name": "c", "image": "x:1"}]},
    }
    core_v1.create_namespaced_pod(namespace, unrelated)

    apps_v1.delete_namespaced_daemon_set("agent", namespace)
    wait_until(lambda: not core_v1.list_namespaced_pod(namespace, label_selector="app=agent").items)
    assert core_v1.read_namespaced_pod("lab", namespace).metadata.name == "lab"


def test_changed_template_replaces_the_pods(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")
    apps_v1.create_namespaced_daemon_set(namespace, _daemonset("agent"))
    wait_until(lambda: _settled(apps_v1, namespace, "agent", 1))
    old = _pods_by_node(core_v1, namespace, "agent")["node-1"].metadata.name

    patch = {"spec": {"template": {"spec": {"containers": [{"name": "puller", "image": "lab:2"}]}}}}
    apps_v1.patch_namespaced_daemon_set("agent", namespace, patch)

    def replaced() -> Any:
        pods = _pods_by_node(core_v1, namespace, "agent")
        pod = pods.get("node-1")
        return (
            pod is not None and pod.metadata.name != old and pod.status.phase == "Running" and pod
        )

    pod = wait_until(replaced)
    assert pod.spec.containers[0].image == "lab:2"
    status = wait_until(lambda: _settled(apps_v1, namespace, "agent", 1))
    assert status.observed_generation == 2
    with pytest.raises(ApiException) as raised:
        core_v1.read_namespaced_pod(old, namespace)
    assert raised.value.status == 404

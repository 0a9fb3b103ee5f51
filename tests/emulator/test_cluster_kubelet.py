"""The kubelet: image pulls, init containers, start-up, failures, deletion, and their Events."""

from __future__ import annotations

import time
from typing import Any

import kubernetes.client
import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from devstack.kube import KubernetesEmulator

from .conftest import WaitUntil

DIGEST = "sha256:" + "ab" * 32


def _pod(name: str, image: str = "lab:1", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "lab", "image": image}], **spec},
    }


def _read(core_v1: kubernetes.client.CoreV1Api, namespace: str, name: str) -> Any:
    return core_v1.read_namespaced_pod(name, namespace)


def _running(core_v1: kubernetes.client.CoreV1Api, namespace: str, name: str) -> bool:
    return bool(_read(core_v1, namespace, name).status.phase == "Running")


def _events(core_v1: kubernetes.client.CoreV1Api, namespace: str, pod: str) -> list[Any]:
    """Events about the pod in the order they were first recorded."""
    events = [
        e for e in core_v1.list_namespaced_event(namespace).items if e.involved_object.name == pod
    ]
    return sorted(events, key=lambda e: int(e.metadata.name.rsplit(".", 1)[1], 16))


def _reasons(core_v1: kubernetes.client.CoreV1Api, namespace: str, pod: str) -> list[str]:
    return [e.reason for e in _events(core_v1, namespace, pod)]


def _gone(core_v1: kubernetes.client.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        _read(core_v1, namespace, name)
    except ApiException as exc:
        return exc.status == 404
    return False


def _image_names(core_v1: kubernetes.client.CoreV1Api, node: str) -> list[str]:
    images = core_v1.read_node(node).status.images or []
    return [name for image in images for name in image.names]


@pytest.mark.cluster_settings(pull_seconds=0.3)
def test_pod_pulls_its_image_then_runs_with_full_status(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")
    # Every committed write, in order, so the pull's window is seen however busy the machine:
    # the pod's first container status, and whether the node held the image at that moment.
    node_has_image = [False]
    first_status: list[tuple[dict[str, Any], bool]] = []

    def observe(kind: str, resource: str, obj: dict[str, Any]) -> None:
        if resource == "nodes" and obj["metadata"]["name"] == "node-1":
            images = (obj.get("status") or {}).get("images") or []
            node_has_image[0] = any("lab:1" in entry.get("names", []) for entry in images)
        elif resource == "pods" and obj["metadata"]["name"] == "lab" and not first_status:
            statuses = (obj.get("status") or {}).get("containerStatuses")
            if statuses:
                first_status.append((statuses[0]["state"], node_has_image[0]))

    unsubscribe = emulator.store.subscribe(observe)
    started = time.monotonic()
    try:
        core_v1.create_namespaced_pod(namespace, _pod("lab"))
        wait_until(lambda: _running(core_v1, namespace, "lab"))
    finally:
        unsubscribe()
    ((state, had_image),) = first_status
    assert state["waiting"]["reason"] == "ContainerCreating"
    assert had_image is False
    assert time.monotonic() - started >= 0.3

    pod = _read(core_v1, namespace, "lab")
    status = pod.status
    assert status.pod_ip.startswith("10.244.")
    assert status.host_ip.startswith("10.0.0.")
    assert status.start_time is not None
    assert status.qos_class == "BestEffort"
    container = status.container_statuses[0]
    assert container.ready is True
    assert container.restart_count == 0
    assert container.state.running.started_at is not None
    assert container.container_id.startswith("containerd://")
    assert container.image_id.startswith("lab@sha256:")
    conditions = {c.type: c.status for c in status.conditions}
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        assert conditions[kind] == "True"
    assert "lab:1" in _image_names(core_v1, "node-1")

    events = wait_until(
        lambda: _events(core_v1, namespace, "lab")[4:] and _events(core_v1, namespace, "lab")
    )
    assert [e.reason for e in events] == ["Scheduled", "Pulling", "Pulled", "Created", "Started"]
    pulled = events[2]
    assert pulled.message.startswith('Successfully pulled image "lab:1" in 0.3')
    assert pulled.source.component == "kubelet"
    assert pulled.source.host == "node-1"
    assert pulled.involved_object.field_path == "spec.containers{lab}"
    assert pulled.reporting_component == "kubelet"
    assert pulled.count == 1
    assert pulled.first_timestamp is not None and pulled.last_timestamp is not None


@pytest.mark.cluster_settings(pull_seconds=0.3)
def test_second_pod_on_the_node_finds_the_image_present(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")
    core_v1.create_namespaced_pod(namespace, _pod("first"))
    wait_until(lambda: _running(core_v1, namespace, "first"))

    core_v1.create_namespaced_pod(namespace, _pod("second"))
    wait_until(lambda: _running(core_v1, namespace, "second"))
    events = wait_until(
        lambda: (
            [e for e in _events(core_v1, namespace, "second") if e.reason == "Started"]
            and _events(core_v1, namespace, "second")
        )
    )
    assert "Pulling" not in [e.reason for e in events]
    pulled = [e for e in events if e.reason == "Pulled"]
    assert pulled[0].message == 'Container image "lab:1" already present on machine'
    assert _image_names(core_v1, "node-1").count("lab:1") == 1


def test_preloaded_images_and_digest_names(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    settings = emulator.cluster.settings
    settings.image_digest_resolver = lambda ref: (
        DIGEST if ref.startswith("registry.test/lab:") else None
    )
    settings.pull_seconds_by_image = {"registry.test/lab:*": 0.2}
    emulator.cluster.add_node("node-1", images=["registry.test/lab:old"])
    assert f"registry.test/lab@{DIGEST}" in _image_names(core_v1, "node-1")

    # Same digest under another tag: present already, no pull; the new tag joins the names.
    core_v1.create_namespaced_pod(namespace, _pod("lab", "registry.test/lab:new"))
    wait_until(lambda: _running(core_v1, namespace, "lab"))
    assert "Pulling" not in _reasons(core_v1, namespace, "lab")
    status = _read(core_v1, namespace, "lab").status.container_statuses[0]
    assert status.image_id == f"registry.test/lab@{DIGEST}"
    wait_until(lambda: "registry.test/lab:new" in _image_names(core_v1, "node-1"))
    assert len(core_v1.read_node("node-1").status.images) == 1


@pytest.mark.cluster_settings(init_seconds=0.2)
def test_init_containers_run_one_at_a_time_before_the_containers(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")
    inits = [{"name": "provision", "image": "init:1"}, {"name": "second", "image": "init:1"}]
    core_v1.create_namespaced_pod(namespace, _pod("lab", initContainers=inits))

    def first_init_running() -> Any:
        statuses = _read(core_v1, namespace, "lab").status.init_container_statuses or []
        return statuses and statuses[0].state.running and statuses

    statuses = wait_until(first_init_running)
    assert statuses[1].state.waiting.reason == "PodInitializing"
    pod = _read(core_v1, namespace, "lab")
    assert pod.status.phase == "Pending"
    assert pod.status.container_statuses[0].state.waiting.reason == "PodInitializing"
    initialized = next(c for c in pod.status.conditions if c.type == "Initialized")
    assert initialized.status == "False"
    assert initialized.message == "containers with incomplete status: [provision second]"

    wait_until(lambda: _running(core_v1, namespace, "lab"), timeout=5)
    for status in _read(core_v1, namespace, "lab").status.init_container_statuses:
        assert status.state.terminated.exit_code == 0
        assert status.state.terminated.reason == "Completed"
    events = _events(core_v1, namespace, "lab")
    order = [
        (e.reason, e.involved_object.field_path)
        for e in events
        if e.reason in ("Created", "Started")
    ]
    assert order == [
        ("Created", "spec.initContainers{provision}"),
        ("Started", "spec.initContainers{provision}"),
        ("Created", "spec.initContainers{second}"),
        ("Started", "spec.initContainers{second}"),
        ("Created", "spec.containers{lab}"),
        ("Started", "spec.containers{lab}"),
    ]


@pytest.mark.cluster_settings(crash_backoff_seconds=0.1)
def test_image_pull_fault_gives_err_image_pull_then_back_off(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")
    emulator.cluster.faults.set("image_pull", "broken:*", "manifest unknown")
    reasons: list[str] = []
    stream = watch.Watch()
    since = core_v1.list_namespaced_pod(namespace).metadata.resource_version
    core_v1.create_namespaced_pod(namespace, _pod("lab", "broken:1"))
    changes = stream.stream(
        core_v1.list_namespaced_pod, namespace, resource_version=since, timeout_seconds=5
    )
    for event in changes:
        statuses = event["object"].status.container_statuses or []
        waiting = statuses[0].state.waiting if statuses else None
        if waiting is not None and (not reasons or reasons[-1] != waiting.reason):
            reasons.append(waiting.reason)
        if waiting is not None and waiting.reason == "ImagePullBackOff":
            stream.stop()
    assert reasons[-2:] == ["ErrImagePull", "ImagePullBackOff"]

    pod = _read(core_v1, namespace, "lab")
    assert pod.status.phase == "Pending"
    waiting = pod.status.container_statuses[0].state.waiting
    assert waiting.message == 'Back-off pulling image "broken:1": ErrImagePull: manifest unknown'
    failed = [e for e in _events(core_v1, namespace, "lab") if e.reason == "Failed"]
    assert failed[0].type == "Warning"
    assert failed[0].message == 'Failed to pull image "broken:1": manifest unknown'
    assert "Error: ErrImagePull" in [e.message for e in failed]

    emulator.cluster.faults.clear()
    wait_until(lambda: _running(core_v1, namespace, "lab"))


@pytest.mark.cluster_settings(crash_backoff_seconds=0.02)
def test_crash_loop_restarts_with_back_off_and_never_becomes_ready(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")
    emulator.cluster.faults.set("crash_loop", "crashy:*")
    core_v1.create_namespaced_pod(namespace, _pod("lab", "crashy:1"))

    def backing_off_again() -> Any:
        status = _read(core_v1, namespace, "lab").status
        container = (status.container_statuses or [None])[0]
        if container is None or container.restart_count < 2 or not container.state.waiting:
            return None
        return status

    status = wait_until(backing_off_again)
    container = status.container_statuses[0]
    assert container.state.waiting.reason == "CrashLoopBackOff"
    assert container.last_state.terminated.exit_code == 1
    assert container.last_state.terminated.reason == "Error"
    assert status.phase == "Running"
    assert {c.type: c.status for c in status.conditions}["Ready"] == "False"
    back_off = [e for e in _events(core_v1, namespace, "lab") if e.reason == "BackOff"]
    assert back_off[0].type == "Warning"
    assert back_off[0].message.startswith("Back-off restarting failed container lab in pod lab_")
    assert back_off[0].count >= 2  # repeats of the same event are aggregated
    assert _reasons(core_v1, namespace, "lab").count("Pulled") >= 2

    emulator.cluster.faults.clear()
    wait_until(lambda: _read(core_v1, namespace, "lab").status.container_statuses[0].ready)


@pytest.mark.cluster_settings(pod_termination_seconds=0.3)
def test_deleted_pod_stops_its_containers_then_disappears(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")
    core_v1.create_namespaced_pod(namespace, _pod("lab"))
    wait_until(lambda: _running(core_v1, namespace, "lab"))

    core_v1.delete_namespaced_pod("lab", namespace)

    def stopped() -> Any:
        pod = _read(core_v1, namespace, "lab")
        return pod.status.container_statuses[0].state.terminated and pod

    pod = wait_until(stopped)
    assert pod.metadata.deletion_timestamp is not None
    assert pod.status.container_statuses[0].ready is False
    assert "Killing" in _reasons(core_v1, namespace, "lab")
    wait_until(lambda: _gone(core_v1, namespace, "lab"))


def test_grace_period_caps_the_termination_time(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.settings.pod_termination_seconds = 60
    emulator.cluster.add_node("node-1")
    core_v1.create_namespaced_pod(namespace, _pod("lab", terminationGracePeriodSeconds=1))
    wait_until(lambda: _running(core_v1, namespace, "lab"))

    core_v1.delete_namespaced_pod("lab", namespace)
    wait_until(lambda: _gone(core_v1, namespace, "lab"), timeout=3)


def test_run_to_completion_pod_succeeds(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")
    pod = _pod("prepull", restartPolicy="Never")
    pod["spec"]["containers"][0]["command"] = ["/bin/true"]
    core_v1.create_namespaced_pod(namespace, pod)

    wait_until(lambda: _read(core_v1, namespace, "prepull").status.phase == "Succeeded")
    container = _read(core_v1, namespace, "prepull").status.container_statuses[0]
    assert container.state.terminated.exit_code == 0
    assert "lab:1" in _image_names(core_v1, "node-1")


def test_pods_of_a_removed_node_are_garbage_collected(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.add_node("node-1")
    core_v1.create_namespaced_pod(namespace, _pod("lab"))
    wait_until(lambda: _running(core_v1, namespace, "lab"))

    core_v1.delete_node("node-1")
    wait_until(lambda: _gone(core_v1, namespace, "lab"))

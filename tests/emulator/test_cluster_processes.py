"""Pods of mapped images run as real processes; their status follows the process."""

from __future__ import annotations

import base64
import os
import sys
import time
from typing import Any

import kubernetes.client
import pytest

from devstack.kube import KubernetesEmulator
from devstack.kube.cluster.programs import ImageProgram
from tests.emulator.conftest import WaitUntil

IMAGE = "registry.test/proc:1"
PROGRAMS = {"registry.test/proc": ImageProgram(entrypoint=(sys.executable, "-c"))}
pytestmark = pytest.mark.cluster_settings(programs=PROGRAMS)


@pytest.fixture(autouse=True)
def node(emulator: KubernetesEmulator) -> None:
    """The node every test's pod runs on."""
    emulator.cluster.add_node("node-1")


def _pod(name: str, code: str, *, restart: str = "Always", **container: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": IMAGE, "args": [code], **container}],
        },
    }


def _status(core_v1: kubernetes.client.CoreV1Api, namespace: str, name: str) -> Any:
    return core_v1.read_namespaced_pod(name, namespace).status


def _state(core_v1: kubernetes.client.CoreV1Api, namespace: str, name: str) -> Any:
    statuses = _status(core_v1, namespace, name).container_statuses or []
    return statuses[0] if statuses else None


def _log(emulator: KubernetesEmulator, core_v1: kubernetes.client.CoreV1Api, ns: str) -> str:
    uid = core_v1.read_namespaced_pod("p", ns).metadata.uid
    path = emulator.cluster.processes.log_path(uid, "main", 0)
    return path.read_text() if path.exists() else ""


def test_a_pod_runs_its_process_with_its_environment_and_files(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    core_v1.create_namespaced_config_map(
        namespace, {"metadata": {"name": "conf"}, "data": {"greeting": "hello from a file"}}
    )
    secret = base64.b64encode(b"s3cret").decode()
    core_v1.create_namespaced_secret(
        namespace, {"metadata": {"name": "creds"}, "data": {"TOKEN": secret}}
    )
    code = (
        "import os, time\n"
        "print(os.environ['POD_IP'], os.environ['NAME'], os.environ['TOKEN'], flush=True)\n"
        "print(open(os.environ['CONF'] + '/greeting').read(), flush=True)\n"
        "time.sleep(60)\n"
    )
    pod = _pod(
        "p",
        code,
        env=[
            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "CONF", "value": "/etc/conf"},
        ],
        envFrom=[{"secretRef": {"name": "creds"}}],
        volumeMounts=[{"name": "conf", "mountPath": "/etc/conf"}],
    )
    pod["spec"]["volumes"] = [{"name": "conf", "configMap": {"name": "conf"}}]
    core_v1.create_namespaced_pod(namespace, pod)
    wait_until(lambda: _status(core_v1, namespace, "p").phase == "Running")
    status = _status(core_v1, namespace, "p")
    assert status.pod_ip.startswith("127.") and status.pod_ip != "127.0.0.1"
    assert status.container_statuses[0].ready
    output = wait_until(
        lambda: "hello from a file" in _log(emulator, core_v1, namespace), timeout=15
    )
    assert output
    first_line = _log(emulator, core_v1, namespace).splitlines()[0]
    assert first_line == f"{status.pod_ip} p s3cret"
    pids = emulator.cluster.processes.running(
        core_v1.read_namespaced_pod("p", namespace).metadata.uid
    )
    assert len(pids) == 1
    os.kill(pids[0], 0)  # a real process


@pytest.mark.parametrize(
    ("exit_code", "phase", "reason"), [(0, "Succeeded", "Completed"), (3, "Failed", "Error")]
)
def test_the_exit_code_decides_how_a_pod_ends(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
    exit_code: int,
    phase: str,
    reason: str,
) -> None:
    core_v1.create_namespaced_pod(
        namespace, _pod("p", f"raise SystemExit({exit_code})", restart="Never")
    )
    wait_until(lambda: _status(core_v1, namespace, "p").phase == phase)
    terminated = _state(core_v1, namespace, "p").state.terminated
    assert (terminated.exit_code, terminated.reason) == (exit_code, reason)


def test_a_crashing_process_is_restarted_with_back_off(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    core_v1.create_namespaced_pod(namespace, _pod("p", "raise SystemExit(2)"))

    def crash_looping() -> bool:
        state = _state(core_v1, namespace, "p")
        waiting = state is not None and state.state.waiting
        return bool(waiting and waiting.reason == "CrashLoopBackOff" and state.restart_count >= 1)

    wait_until(crash_looping, timeout=10)
    last = _state(core_v1, namespace, "p").last_state.terminated
    assert last.exit_code == 2


def test_deleting_a_pod_stops_its_process_within_the_grace_period(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """A process that ignores SIGTERM is killed once the pod's grace period (1 s) is over."""
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    core_v1.create_namespaced_pod(namespace, _pod("p", code))
    wait_until(lambda: "ready" in _log(emulator, core_v1, namespace), timeout=15)
    uid = core_v1.read_namespaced_pod("p", namespace).metadata.uid
    [pid] = emulator.cluster.processes.running(uid)
    started = time.monotonic()
    core_v1.delete_namespaced_pod("p", namespace)
    wait_until(lambda: not core_v1.list_namespaced_pod(namespace).items, timeout=10)
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 5
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_container_that_cannot_run_waits_with_a_reason(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    pod = _pod("p", "pass", command=["no-such-program-here"])
    core_v1.create_namespaced_pod(namespace, pod)

    def waiting_reason() -> str | None:
        state = _state(core_v1, namespace, "p")
        waiting = state is not None and state.state.waiting
        return waiting.reason if waiting else None

    wait_until(lambda: waiting_reason() == "CreateContainerConfigError")
    message = _state(core_v1, namespace, "p").state.waiting.message
    assert "no-such-program-here" in message


def test_stopping_the_cluster_leaves_no_process(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    core_v1.create_namespaced_pod(
        namespace, _pod("p", "import time; print('up', flush=True); time.sleep(60)")
    )
    wait_until(lambda: "up" in _log(emulator, core_v1, namespace), timeout=15)
    uid = core_v1.read_namespaced_pod("p", namespace).metadata.uid
    [pid] = emulator.cluster.processes.running(uid)
    emulator.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)

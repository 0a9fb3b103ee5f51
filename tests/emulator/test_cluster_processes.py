"""Pods of mapped images run as real processes; their status follows the process."""

from __future__ import annotations

import base64
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import requests

from devstack.kube import KubernetesEmulator
from devstack.kube.cluster import listeners
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


def test_the_images_own_program_is_not_taken_for_a_path_under_a_mount(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """A volume mounted over the directory the stack (and so the image's program) lives in:
    the program is still the stack's, while a path the pod gives is the volume's."""
    top = "/" + Path(sys.executable).parts[1]
    pod = _pod(
        "p",
        "import os; print(os.environ['DATA'], flush=True)",
        restart="Never",
        env=[{"name": "DATA", "value": f"{top}/data"}],
        volumeMounts=[{"name": "scratch", "mountPath": top}],
    )
    pod["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    core_v1.create_namespaced_pod(namespace, pod)
    wait_until(lambda: _status(core_v1, namespace, "p").phase == "Succeeded")
    data = _log(emulator, core_v1, namespace).strip()
    assert data.endswith("/volumes/scratch/data"), data


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


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_a_containers_processes_end_with_its_first_one(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """As in a container, whatever the first process started is killed when it ends: here a
    child that moved to a process group of its own (as Ray's workers do), which stopping the
    first process's group would miss."""
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " process_group=0)\n"
        "print(child.pid, flush=True)\n"
    )
    core_v1.create_namespaced_pod(namespace, _pod("p", code, restart="Never"))
    wait_until(lambda: _status(core_v1, namespace, "p").phase == "Succeeded", timeout=15)
    child = int(_log(emulator, core_v1, namespace).split()[0])
    wait_until(lambda: not _alive(child))


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


def _ready(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> bool:
    state = _state(core_v1, namespace, "p")
    return bool(state is not None and state.ready)


def _home(emulator: KubernetesEmulator, core_v1: kubernetes.client.CoreV1Api, ns: str) -> Any:
    """The process's working directory: its pod's home."""
    uid = core_v1.read_namespaced_pod("p", ns).metadata.uid
    return emulator.cluster.processes.pod_dir(uid) / "home"


HTTP_READY_WHEN_FILE = (
    "import http.server, os\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        ok = self.path == '/ready' and os.path.exists('flag')\n"
    "        self.send_response(200 if ok else 503)\n"
    "        self.end_headers()\n"
    "    def log_message(self, *args):\n"
    "        pass\n"
    "http.server.HTTPServer((os.environ['POD_IP'], 8888), H).serve_forever()\n"
)


def _http_status(url: str) -> int | None:
    try:
        return requests.get(url, timeout=1).status_code
    except requests.RequestException:
        return None


def test_an_http_readiness_probe_decides_when_the_container_is_ready(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """The server answers 503 until a file exists: not ready, ready, then unready again."""
    probe = {
        "httpGet": {"path": "/ready", "port": "http"},
        "periodSeconds": 1,
        "failureThreshold": 1,
    }
    pod = _pod(
        "p",
        HTTP_READY_WHEN_FILE,
        ports=[{"name": "http", "containerPort": 8888}],
        readinessProbe=probe,
    )
    core_v1.create_namespaced_pod(namespace, pod)
    wait_until(lambda: _status(core_v1, namespace, "p").phase == "Running")
    flag = _home(emulator, core_v1, namespace) / "flag"
    # Serving, but answering 503: the probe fails and the container stays unready.
    pod_ip = _status(core_v1, namespace, "p").pod_ip
    wait_until(lambda: _http_status(f"http://{pod_ip}:8888/ready") == 503, timeout=15)
    assert not _ready(core_v1, namespace)
    flag.write_text("")
    wait_until(lambda: _ready(core_v1, namespace), timeout=10)
    conditions = {c.type: c.status for c in _status(core_v1, namespace, "p").conditions}
    assert conditions["Ready"] == "True"
    flag.unlink()
    wait_until(lambda: not _ready(core_v1, namespace), timeout=10)
    events = core_v1.list_namespaced_event(namespace).items
    assert any(e.reason == "Unhealthy" for e in events)


def test_a_tcp_readiness_probe_waits_for_the_port_to_open(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    code = (
        "import os, socket, time\n"
        "while not os.path.exists('flag'):\n"
        "    time.sleep(0.05)\n"
        "s = socket.create_server((os.environ['POD_IP'], 7000))\n"
        "while True:\n"
        "    s.accept()[0].close()\n"
    )
    probe = {"tcpSocket": {"port": 7000}, "periodSeconds": 1}
    core_v1.create_namespaced_pod(namespace, _pod("p", code, readinessProbe=probe))
    wait_until(lambda: _status(core_v1, namespace, "p").phase == "Running")
    assert not _ready(core_v1, namespace)
    (_home(emulator, core_v1, namespace) / "flag").write_text("")
    wait_until(lambda: _ready(core_v1, namespace), timeout=10)


def _bare_server(*, ipv6: bool = False) -> str:
    """A program that listens on port 7000 at its pod's address without ``SO_REUSEADDR`` (as
    gRPC's servers and plain sockets do), as an IPv6 socket bound to ``::ffff:a.b.c.d`` with
    ``ipv6``, and closes each connection it accepts."""
    if ipv6:
        make = (
            "s = socket.socket(socket.AF_INET6)\n"
            "s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)\n"
            "s.bind(('::ffff:' + os.environ['POD_IP'], 7000))\n"
        )
    else:
        make = "s = socket.socket()\ns.bind((os.environ['POD_IP'], 7000))\n"
    return "import os, socket\n" + make + "s.listen()\nwhile True:\n    s.accept()[0].close()\n"


def test_a_tcp_probe_counts_an_ipv6_socket_listening_at_the_pods_address(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """As gRPC's servers (Ray's client server) listen at an IPv4 address: an IPv6 socket bound
    to it as ``::ffff:a.b.c.d``, which the kernel lists among IPv6 sockets."""
    code = _bare_server(ipv6=True)
    probe = {"tcpSocket": {"port": 7000}, "periodSeconds": 1}
    core_v1.create_namespaced_pod(namespace, _pod("p", code, readinessProbe=probe))
    # A new interpreter started on a machine the whole suite keeps busy: the wait is generous.
    wait_until(lambda: _ready(core_v1, namespace), timeout=30)


@pytest.mark.parametrize(
    ("probe", "ready", "reason"),
    [
        ({"exec": {"command": ["true"]}}, True, "ProbeNotRun"),
        ({"httpGet": {"port": "missing"}}, False, "Unhealthy"),
    ],
)
def test_a_probe_the_stack_cannot_run_is_reported_in_an_event(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
    probe: dict[str, Any],
    ready: bool,
    reason: str,
) -> None:
    pod = _pod("p", "import time; time.sleep(60)", readinessProbe=probe)
    core_v1.create_namespaced_pod(namespace, pod)

    def reported() -> bool:
        return any(e.reason == reason for e in core_v1.list_namespaced_event(namespace).items)

    wait_until(reported)
    assert _ready(core_v1, namespace) is ready


def test_the_log_is_the_process_output_with_tail_lines(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    code = "for i in range(1, 6): print(i, flush=True)\nimport time; time.sleep(60)"
    core_v1.create_namespaced_pod(namespace, _pod("p", code))
    wait_until(lambda: "5" in _log(emulator, core_v1, namespace), timeout=15)
    assert core_v1.read_namespaced_pod_log("p", namespace) == "1\n2\n3\n4\n5\n"
    assert core_v1.read_namespaced_pod_log("p", namespace, tail_lines=2) == "4\n5\n"
    assert core_v1.read_namespaced_pod_log("p", namespace, limit_bytes=3) == "1\n2"


def test_the_previous_log_is_the_last_start_before_this_one(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    code = "import os; print('started', os.getpid(), flush=True); raise SystemExit(2)"
    core_v1.create_namespaced_pod(namespace, _pod("p", code))
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core_v1.read_namespaced_pod_log("p", namespace, previous=True)
    assert refused.value.status == 400
    assert 'previous terminated container "main"' in json.loads(refused.value.body)["message"]

    def restarted() -> bool:
        state = _state(core_v1, namespace, "p")
        return state is not None and (state.restart_count or 0) >= 1

    wait_until(restarted, timeout=10)
    previous = core_v1.read_namespaced_pod_log("p", namespace, previous=True)
    assert previous.startswith("started ")


def test_a_followed_log_streams_until_the_process_ends(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    code = (
        "import os, time\n"
        "print('first', flush=True)\n"
        "while not os.path.exists('flag'):\n"
        "    time.sleep(0.05)\n"
        "print('second', flush=True)\n"
    )
    core_v1.create_namespaced_pod(namespace, _pod("p", code, restart="Never"))
    wait_until(lambda: "first" in _log(emulator, core_v1, namespace), timeout=15)
    response = core_v1.read_namespaced_pod_log("p", namespace, follow=True, _preload_content=False)
    chunks = response.stream(amt=None, decode_content=True)
    received = next(chunks)
    assert received == b"first\n"
    (_home(emulator, core_v1, namespace) / "flag").write_text("")
    rest = b"".join(chunks)  # ends when the process does
    assert received + rest == b"first\nsecond\n"


def test_a_pod_of_two_containers_needs_the_container_named(
    core_v1: kubernetes.client.CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    pod = _pod("p", "import time; time.sleep(60)")
    pod["spec"]["containers"].append({**pod["spec"]["containers"][0], "name": "side"})
    core_v1.create_namespaced_pod(namespace, pod)
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core_v1.read_namespaced_pod_log("p", namespace)
    assert refused.value.status == 400
    message = json.loads(refused.value.body)["message"]
    assert "a container name must be specified for pod p" in message
    assert "[main side]" in message
    with pytest.raises(kubernetes.client.ApiException) as unknown:
        core_v1.read_namespaced_pod_log("p", namespace, container="other")
    assert "container other is not valid for pod p" in json.loads(unknown.value.body)["message"]


HELLO_SERVER = (
    "import http.server, os\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = os.environ['POD_NAME'].encode()\n"
    "        self.send_response(200)\n"
    "        self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers()\n"
    "        self.wfile.write(body)\n"
    "    def log_message(self, *args):\n"
    "        pass\n"
    "http.server.HTTPServer((os.environ['POD_IP'], 8888), H).serve_forever()\n"
)


def test_a_service_forwards_its_port_to_a_ready_pod(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """The Service's loopback ClusterIP reaches the pod through a named target port; with
    no ready endpoint a connection is refused, and a deleted Service stops listening."""
    service = {
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]},
    }
    created = core_v1.create_namespaced_service(namespace, service)
    url = f"http://{created.spec.cluster_ip}:80/"
    assert emulator.cluster.addresses.is_service_address(created.spec.cluster_ip)
    with pytest.raises(requests.ConnectionError):
        requests.get(url, timeout=5)  # no endpoint yet
    pod = _pod("p", HELLO_SERVER, ports=[{"name": "http", "containerPort": 8888}])
    pod["metadata"]["labels"] = {"app": "web"}
    core_v1.create_namespaced_pod(namespace, pod)

    def answer() -> str | None:
        try:
            return requests.get(url, timeout=5).text
        except requests.ConnectionError:
            return None

    assert wait_until(lambda: answer() == "p", timeout=15)
    core_v1.delete_namespaced_service("web", namespace)
    wait_until(lambda: answer() is None)


def test_a_probe_another_process_answers_keeps_the_container_unready_and_says_why(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """Something else listens at the pod's address and port before the pod can (another
    stack's lab, as two stacks sharing loopback addresses once did): the probe connects, but
    the socket is not the pod's, so the container stays unready and an event says why. Once
    the stranger goes and the pod's own process listens, it becomes ready."""
    code = (
        "import os, socket, time\n"
        "while not os.path.exists('flag'):\n"
        "    time.sleep(0.05)\n"
        "while True:\n"
        "    try:\n"
        "        s = socket.create_server((os.environ['POD_IP'], 7000))\n"
        "        break\n"
        "    except OSError:\n"
        "        time.sleep(0.05)\n"
        "while True:\n"
        "    s.accept()[0].close()\n"
    )
    probe = {"tcpSocket": {"port": 7000}, "periodSeconds": 1}
    core_v1.create_namespaced_pod(namespace, _pod("p", code, readinessProbe=probe))
    wait_until(lambda: _status(core_v1, namespace, "p").phase == "Running")
    address = _status(core_v1, namespace, "p").pod_ip
    # The stranger (the test process) takes the pod's address and port before the pod does.
    stranger = socket.create_server((address, 7000))
    try:
        (_home(emulator, core_v1, namespace) / "flag").write_text("")

        def told() -> list[str]:
            events = core_v1.list_namespaced_event(namespace).items
            return [e.message for e in events if e.reason == "Unhealthy"]

        messages = wait_until(told, timeout=10)
        assert f"{address}:7000 is answered by a process that is not this pod's" in messages[0]
        assert not _ready(core_v1, namespace)
    finally:
        stranger.close()
    wait_until(lambda: _ready(core_v1, namespace), timeout=10)


def test_a_pod_never_gets_an_address_a_socket_of_an_earlier_pod_lingers_at(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """A pod's server closed a connection (it waits out TIME_WAIT for a minute) and the pod
    went; the next pod's server, which does not set ``SO_REUSEADDR``, binds the same port at
    its own address and becomes ready, as it would in its own network namespace."""
    serve = _bare_server()
    probe = {"tcpSocket": {"port": 7000}, "periodSeconds": 1}
    core_v1.create_namespaced_pod(namespace, _pod("p", serve, readinessProbe=probe))
    wait_until(lambda: _ready(core_v1, namespace), timeout=10)
    first = _status(core_v1, namespace, "p").pod_ip
    # A client of the pod's own: the server closes first, so its side waits out TIME_WAIT.
    with socket.create_connection((first, 7000)) as client:
        client.recv(1)
    core_v1.delete_namespaced_pod("p", namespace, grace_period_seconds=0)
    wait_until(lambda: not core_v1.list_namespaced_pod(namespace).items)
    assert first in listeners.addresses_with_sockets(first)

    core_v1.create_namespaced_pod(namespace, _pod("p", serve, readinessProbe=probe))
    wait_until(lambda: _ready(core_v1, namespace), timeout=10)
    assert _status(core_v1, namespace, "p").pod_ip != first


def test_host_path_volumes_are_one_file_system_every_pod_shares(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """Two pods mounting the same host path at different places see the same files, under the
    nodes' file system; HOME under the mount is the directory there, and ``..`` in a host
    path does not lead out of that file system."""
    writer = _pod(
        "p",
        "import os; open(os.environ['HOME'] + '/note.txt', 'w').write('from the writer')",
        restart="Never",
        env=[{"name": "HOME", "value": "/home/rachel"}],
        volumeMounts=[{"name": "home", "mountPath": "/home"}],
    )
    writer["spec"]["volumes"] = [{"name": "home", "hostPath": {"path": "/srv/home"}}]
    rachel = emulator.cluster.processes.node_files / "srv" / "home" / "rachel"
    rachel.mkdir(parents=True)
    core_v1.create_namespaced_pod(namespace, writer)
    wait_until(lambda: _status(core_v1, namespace, "p").phase == "Succeeded")
    assert (rachel / "note.txt").read_text() == "from the writer"

    reader = _pod(
        "reader",
        "import os, sys; print(os.environ['HOME']); print(open(sys.argv[1]).read())",
        restart="Never",
        env=[{"name": "HOME", "value": "/elsewhere"}],
        volumeMounts=[{"name": "root", "mountPath": "/x"}],
    )
    reader["spec"]["containers"][0]["args"].append("/x/srv/home/rachel/note.txt")
    reader["spec"]["volumes"] = [{"name": "root", "hostPath": {"path": "/srv/../../"}}]
    core_v1.create_namespaced_pod(namespace, reader)
    wait_until(lambda: _status(core_v1, namespace, "reader").phase == "Succeeded")
    uid = core_v1.read_namespaced_pod("reader", namespace).metadata.uid
    home, content = emulator.cluster.processes.log_path(uid, "main", 0).read_text().splitlines()
    assert content == "from the writer"
    # HOME outside every mount is the pod's own directory, not the nodes' files.
    assert home == str(emulator.cluster.processes.pod_dir(uid) / "home")


def test_a_json_env_value_has_each_path_under_a_mount_rewritten(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """As the file server's FILESERVER_MOUNTS: each string that starts with a mount path, at
    any depth, becomes the mount's directory; keys, other strings, numbers and values that are
    not JSON documents stay as they were."""
    mounts = [
        {"name": "home", "path": "/home", "readOnly": False},
        {"name": "deep", "path": "/home/rachel/data", "nested": {"/home/key": ["/home/x", 3]}},
        {"name": "other", "path": "/homework"},
    ]
    env = {
        "MOUNTS": json.dumps(mounts, indent=2),
        "UNCHANGED": '{"path": "/srv/data", "n": 1.5}',
        "BROKEN": "[/home/not json",
    }
    names = sorted(env)
    code = f"import json, os; print(json.dumps({{k: os.environ[k] for k in {names!r}}}))"
    pod = _pod(
        "p",
        code,
        restart="Never",
        env=[{"name": k, "value": v} for k, v in env.items()],
        volumeMounts=[{"name": "home", "mountPath": "/home"}],
    )
    pod["spec"]["volumes"] = [{"name": "home", "hostPath": {"path": "/srv/home"}}]
    core_v1.create_namespaced_pod(namespace, pod)
    wait_until(lambda: _status(core_v1, namespace, "p").phase == "Succeeded")
    seen = json.loads(_log(emulator, core_v1, namespace))
    home = str(emulator.cluster.processes.node_files / "srv" / "home")
    assert json.loads(seen["MOUNTS"]) == [
        {"name": "home", "path": home, "readOnly": False},
        {
            "name": "deep",
            "path": f"{home}/rachel/data",
            "nested": {"/home/key": [f"{home}/x", 3]},
        },
        {"name": "other", "path": "/homework"},
    ]
    assert seen["UNCHANGED"] == env["UNCHANGED"]  # nothing to rewrite: the text as written
    assert seen["BROKEN"] == "[/home/not json"


def test_without_a_home_of_its_own_a_container_gets_its_users_home_from_the_pods_passwd(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """As a runtime does for a lab, whose ``/etc/passwd`` comes from a ConfigMap: the entry
    of ``runAsUser`` names its home, here on the home volume."""
    passwd = "root:x:0:0:root:/root:/bin/sh\nwile:x:1102:1500:Wile:/home/wile:/bin/bash\n"
    core_v1.create_namespaced_config_map(
        namespace, {"metadata": {"name": "nss"}, "data": {"passwd": passwd}}
    )
    pod = _pod(
        "p",
        "import os; print(os.environ['HOME'], os.getcwd() == os.environ['HOME'])",
        restart="Never",
        workingDir="/home/wile",
        volumeMounts=[
            {"name": "home", "mountPath": "/home"},
            {"name": "nss", "mountPath": "/etc/passwd", "subPath": "passwd", "readOnly": True},
        ],
    )
    pod["spec"]["securityContext"] = {"runAsUser": 1102}
    pod["spec"]["volumes"] = [
        {"name": "home", "hostPath": {"path": "/srv/home"}},
        {"name": "nss", "configMap": {"name": "nss"}},
    ]
    wile = emulator.cluster.processes.node_files / "srv" / "home" / "wile"
    wile.mkdir(parents=True)
    core_v1.create_namespaced_pod(namespace, pod)
    wait_until(lambda: _status(core_v1, namespace, "p").phase == "Succeeded")
    assert _log(emulator, core_v1, namespace).split() == [str(wile), "True"]

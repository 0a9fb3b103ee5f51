"""Request faults: latency, errors, hangs and dropped watches, in-process and over HTTP."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import kubernetes.client
import pytest
import requests
import urllib3
from kubernetes.client import CoreV1Api

from devstack.kube import KubernetesEmulator
from tests.emulator.conftest import WaitUntil


def _fails(call: Any, *args: Any, **kwargs: Any) -> int:
    with pytest.raises(kubernetes.client.ApiException) as caught:
        call(*args, **kwargs)
    return int(caught.value.status)


def test_added_latency(emulator: KubernetesEmulator, core_v1: CoreV1Api) -> None:
    emulator.faults.add_latency(0.2, verb="list")
    start = time.monotonic()
    core_v1.list_namespace()
    assert time.monotonic() - start >= 0.2
    start = time.monotonic()
    core_v1.get_api_resources()
    assert time.monotonic() - start < 0.2  # other verbs are not slowed


def test_fail_next_requests_matching(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str
) -> None:
    emulator.faults.fail(count=2, verb="create", resource="configmaps")
    core_v1.list_namespaced_config_map(namespace)  # not matching: untouched
    assert (
        _fails(core_v1.create_namespaced_config_map, namespace, {"metadata": {"name": "x"}}) == 500
    )
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "x"}})
    body = json.loads(caught.value.body)
    assert body["kind"] == "Status" and body["reason"] == "InternalError" and body["code"] == 500
    created = core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "x"}})
    assert created.metadata.name == "x"  # the third attempt goes through
    assert [e.code for e in emulator.audit.entries(verb="create", resource="configmaps")] == [
        500,
        500,
        201,
    ]


def test_error_rate_is_seeded_and_roughly_right(
    emulator: KubernetesEmulator, core_v1: CoreV1Api
) -> None:
    def run() -> list[bool]:
        emulator.faults.clear()
        emulator.faults.seed(42)
        emulator.faults.fail(0.3, verb="list")
        outcomes = []
        for _ in range(100):
            try:
                core_v1.list_namespace()
                outcomes.append(True)
            except kubernetes.client.ApiException as exc:
                assert exc.status == 500
                outcomes.append(False)
        return outcomes

    first, second = run(), run()
    assert first == second  # the same seed fails the same requests
    assert 15 <= first.count(False) <= 45


def test_timeouts_hold_past_the_client_deadline(
    emulator: KubernetesEmulator, core_v1: CoreV1Api
) -> None:
    # Every attempt hangs: urllib3 retries a read timeout, so one hung attempt is not enough.
    emulator.faults.time_out(verb="list", resource="namespaces", hold=5)
    start = time.monotonic()
    with pytest.raises(urllib3.exceptions.HTTPError):
        core_v1.list_namespace(_request_timeout=0.2)
    assert 0.2 <= time.monotonic() - start < 3
    assert [e.code for e in emulator.audit.entries(resource="namespaces")] == []  # still held
    emulator.faults.clear()  # releases the held request
    assert core_v1.list_namespace(_request_timeout=2).items is not None


def test_drop_watches(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    ended = threading.Event()

    def follow() -> None:
        response = requests.get(
            f"{emulator.url}/api/v1/namespaces/{namespace}/pods",
            params={"watch": "1", "resourceVersion": "1"},
            stream=True,
            timeout=30,
        )
        for _ in response.iter_lines(chunk_size=1):
            pass
        ended.set()

    threads = [threading.Thread(target=follow, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    wait_until(lambda: emulator.open_watches == 3)
    assert emulator.faults.drop_watches() == 3
    assert ended.wait(5)
    for thread in threads:
        thread.join(5)
    assert emulator.open_watches == 0


def test_faults_over_http(emulator: KubernetesEmulator, core_v1: CoreV1Api) -> None:
    url = f"{emulator.url}/_emulator/faults"
    assert (
        requests.put(url, json={"fail_next": 1, "verb": "list", "code": 503}, timeout=5).status_code
        == 200
    )
    assert _fails(core_v1.list_namespace) == 503
    core_v1.list_namespace()
    requests.put(url, json={"latency": 0.15, "resource": "namespaces"}, timeout=5)
    start = time.monotonic()
    core_v1.list_namespace()
    assert time.monotonic() - start >= 0.15
    requests.put(url, json={"clear": True}, timeout=5)
    start = time.monotonic()
    core_v1.list_namespace()
    assert time.monotonic() - start < 0.15


def test_drop_watches_over_http(
    emulator: KubernetesEmulator, namespace: str, wait_until: WaitUntil
) -> None:
    url = f"{emulator.url}/api/v1/namespaces/{namespace}/configmaps"

    def listed() -> dict[str, Any]:
        body: dict[str, Any] = requests.get(url, timeout=5).json()
        return body

    # The namespace controller adds the namespace's CA bundle on its own; the watch starts
    # after it, so that the only thing that can end it is the fault.
    wait_until(lambda: any(i["metadata"]["name"] == "kube-root-ca.crt" for i in listed()["items"]))
    version = listed()["metadata"]["resourceVersion"]
    response = requests.get(
        url, params={"watch": "1", "resourceVersion": version}, stream=True, timeout=30
    )
    wait_until(lambda: emulator.open_watches == 1)
    requests.put(f"{emulator.url}/_emulator/faults", json={"drop_watches": True}, timeout=5)
    assert list(response.iter_lines(chunk_size=1)) == []


def test_nodes_and_pod_faults_over_http(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    created = requests.post(
        f"{emulator.url}/_emulator/nodes",
        json={"name": "remote", "labels": {"pool": "a"}},
        timeout=5,
    )
    assert created.status_code == 201
    assert core_v1.read_node("remote").metadata.labels["pool"] == "a"
    set_fault = requests.put(
        f"{emulator.url}/_emulator/pod-faults",
        json={"kind": "image_pull", "pattern": "broken:*", "message": "no such image"},
        timeout=5,
    )
    assert set_fault.status_code == 200
    body = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "broken:1"}]}}
    core_v1.create_namespaced_pod(namespace, body)

    def waiting_reason() -> str | None:
        statuses = core_v1.read_namespaced_pod("p", namespace).status.container_statuses or []
        waiting = statuses[0].state.waiting if statuses else None
        return waiting.reason if waiting else None

    assert wait_until(lambda: waiting_reason() in ("ErrImagePull", "ImagePullBackOff"))
    assert requests.delete(f"{emulator.url}/_emulator/pod-faults", timeout=5).status_code == 200
    assert requests.put(f"{emulator.url}/_emulator/nothing", json={}, timeout=5).status_code == 404


def test_api_latency_is_a_setting_that_faults_leave_alone() -> None:
    """The realistic control plane of benchmarks and ``make run``: every API call waits,
    whatever faults are armed or cleared."""
    with KubernetesEmulator(api_latency=0.05) as kube:
        client = kube.api_client()
        try:
            core_v1 = CoreV1Api(client)
            kube.faults.clear()
            for call in (core_v1.list_namespace, core_v1.get_api_resources):
                start = time.monotonic()
                call()
                assert time.monotonic() - start >= 0.05
            kube.api_latency = 0.1
            start = time.monotonic()
            core_v1.create_namespace({"metadata": {"name": "slow"}})
            assert time.monotonic() - start >= 0.1
            assert kube.api_latency == 0.1
            kube.api_latency = -1
            assert kube.api_latency == 0.0
        finally:
            client.close()

"""``python -m devstack.kube`` as its own process, and the cost of a request."""

from __future__ import annotations

import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import kubernetes.client
import pytest
import requests

from devstack.kube import KubernetesEmulator
from tests.emulator.conftest import WaitUntil

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_standalone_process(tmp_path: Path, wait_until: WaitUntil) -> None:
    state = tmp_path / "kube.json"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "devstack.kube",
            "--port",
            "0",
            "--nodes",
            "2",
            "--state-file",
            str(state),
            "--api-latency-ms",
            "50",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_until(state.exists, timeout=20, message="the emulator never wrote its state file")
        info = json.loads(state.read_text())
        assert info["pid"] == process.pid
        configuration = kubernetes.client.Configuration(host=info["url"])
        configuration.ssl_ca_cert = info["ca"]  # served over TLS, as an API server is
        api = kubernetes.client.ApiClient(configuration)
        core = kubernetes.client.CoreV1Api(api)
        started = time.monotonic()
        assert sorted(n.metadata.name for n in core.list_node().items) == ["node-1", "node-2"]
        # The API latency applies (a lower bound only).
        assert time.monotonic() - started >= 0.05
        entries = requests.get(f"{info['url']}/_emulator/audit", timeout=5).json()["entries"]
        assert [(e["verb"], e["resource"]) for e in entries] == [("list", "nodes")]
        api.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert not state.exists()
        assert process.stdout is not None
        assert process.stdout.read().decode().strip() == info["url"]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_request_cost_is_small_and_does_not_grow(
    emulator: KubernetesEmulator, namespace: str
) -> None:
    emulator.store.create("configmaps", {"metadata": {"name": "hot", "namespace": namespace}})
    address = urlsplit(emulator.url)
    connection = http.client.HTTPSConnection(
        address.hostname or "", address.port, context=emulator.authority.client_context()
    )

    def timings(count: int) -> list[float]:
        result = []
        for _ in range(count):
            start = time.perf_counter()
            connection.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/hot")
            response = connection.getresponse()
            response.read()
            assert response.status == 200
            result.append(time.perf_counter() - start)
        return result

    early = statistics.median(timings(200))
    timings(1000)
    late = statistics.median(timings(200))
    connection.close()
    assert early < 0.005, f"median request took {early * 1000:.2f} ms"
    assert late < max(3 * early, 0.002), (
        f"requests slowed from {early * 1000:.2f} to {late * 1000:.2f} ms"
    )

"""Cluster DNS for the stack's processes: a Service with a loopback cluster IP is named as
cluster DNS names it, in a Python process started with the DNS's environment; a Service
without one, and a name of the machine's, resolve as they would without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from kubernetes.client import CoreV1Api

from devstack.kube import KubernetesEmulator
from devstack.kube.cluster.programs import ImageProgram
from tests.emulator.conftest import WaitUntil

RESOLVE = """
import json, socket, sys
found = {}
for name in sys.argv[1:]:
    try:
        found[name] = socket.getaddrinfo(name, 80, socket.AF_INET)[0][4][0]
    except socket.gaierror:
        found[name] = None
try:
    import aiodns  # noqa: F401
    found["aiodns"] = "importable"
except ImportError:
    found["aiodns"] = "hidden"
print(json.dumps(found))
"""


def _resolve(env: dict[str, str], *names: str) -> dict[str, str | None]:
    done = subprocess.run(
        [sys.executable, "-c", RESOLVE, *names],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    answer: dict[str, str | None] = json.loads(done.stdout)
    return answer


@pytest.mark.cluster_settings(programs={"*/dask/dask": ImageProgram()})
def test_a_services_names_resolve_to_its_cluster_ip_while_it_exists(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str, wait_until: WaitUntil
) -> None:
    service = {
        "metadata": {"name": "sched"},
        "spec": {"selector": {"app": "x"}, "ports": [{"port": 8786}]},
    }
    ip = core_v1.create_namespaced_service(namespace, service).spec.cluster_ip
    assert ip.startswith("127.")
    hosts = emulator.cluster.dns.hosts_file
    wait_until(lambda: "sched" in hosts.read_text(encoding="utf-8"))
    env = emulator.cluster.dns.environment()
    names = [f"sched.{namespace}", f"sched.{namespace}.svc", f"sched.{namespace}.svc.cluster.local"]
    found = _resolve(env, *names, "localhost", f"nothing.{namespace}.svc.cluster.local")
    assert [found[n] for n in names] == [ip, ip, ip]
    assert found["localhost"] == "127.0.0.1"
    assert found[f"nothing.{namespace}.svc.cluster.local"] is None
    # aiohttp would otherwise resolve through c-ares, which never reads this file.
    assert found["aiodns"] == "hidden"

    core_v1.delete_namespaced_service("sched", namespace)
    wait_until(lambda: "sched" not in hosts.read_text(encoding="utf-8"))
    assert _resolve(env, f"sched.{namespace}")[f"sched.{namespace}"] is None


def test_without_loopback_services_nothing_is_named(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str
) -> None:
    """A stack whose pods are all emulated gives cluster IPs nothing answers at: no names."""
    service = {"metadata": {"name": "quiet"}, "spec": {"ports": [{"port": 80}]}}
    ip = core_v1.create_namespaced_service(namespace, service).spec.cluster_ip
    assert not ip.startswith("127.")
    env = emulator.cluster.dns.environment()
    assert _resolve(env, f"quiet.{namespace}")[f"quiet.{namespace}"] is None

"""Fixtures for tests that drive the Kubernetes emulator through the real client.

``emulator`` is a fresh, started emulator per test; ``kubectl`` runs the machine's kubectl
against it. Markers tune it:

    @pytest.mark.cluster_settings(pod_termination_seconds=60)   # ClusterSettings fields
    @pytest.mark.watch_history(5)                                # changes kept for watches
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import kubernetes.client
import pytest
import yaml

from devstack.kube import KubernetesEmulator
from devstack.kube.cluster import ClusterSettings
from devstack.kube.crds import crd
from devstack.kube.resources import ResourceType

T = TypeVar("T")

WaitUntil = Callable[..., Any]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cluster_settings(**fields): ClusterSettings for the emulator fixture"
    )
    config.addinivalue_line("markers", "watch_history(n): watch history size for the emulator")


@pytest.fixture
def emulator(request: pytest.FixtureRequest) -> Iterator[KubernetesEmulator]:
    settings_marker = request.node.get_closest_marker("cluster_settings")
    history_marker = request.node.get_closest_marker("watch_history")
    settings = ClusterSettings(**settings_marker.kwargs) if settings_marker else None
    history = history_marker.args[0] if history_marker else 10000
    with KubernetesEmulator(settings=settings, watch_history=history) as kube:
        yield kube


@pytest.fixture
def api_client(emulator: KubernetesEmulator) -> Iterator[kubernetes.client.ApiClient]:
    client = emulator.api_client()
    yield client
    client.close()


@pytest.fixture
def core_v1(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api_client)


@pytest.fixture
def apps_v1(api_client: kubernetes.client.ApiClient) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(api_client)


@pytest.fixture
def batch_v1(api_client: kubernetes.client.ApiClient) -> kubernetes.client.BatchV1Api:
    return kubernetes.client.BatchV1Api(api_client)


@pytest.fixture
def networking_v1(api_client: kubernetes.client.ApiClient) -> kubernetes.client.NetworkingV1Api:
    return kubernetes.client.NetworkingV1Api(api_client)


@pytest.fixture
def extensions(api_client: kubernetes.client.ApiClient) -> kubernetes.client.ApiextensionsV1Api:
    return kubernetes.client.ApiextensionsV1Api(api_client)


@pytest.fixture
def objects(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api_client)


@pytest.fixture
def namespace(core_v1: kubernetes.client.CoreV1Api) -> str:
    """A namespace named ``test`` that exists for the test."""
    core_v1.create_namespace({"metadata": {"name": "test"}})
    return "test"


def _wait_until(
    condition: Callable[[], T], timeout: float = 5.0, interval: float = 0.005, message: str = ""
) -> T:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(message or f"condition not met within {timeout} s")
        time.sleep(interval)


@pytest.fixture
def wait_until() -> WaitUntil:
    """``wait_until(condition, timeout=5.0)``: poll with a deadline instead of sleeping."""
    return _wait_until


class Kubectl:
    """The machine's kubectl with a kubeconfig for one emulator and a cache of its own.

    ``kubectl(*args)`` is its output, a failing command failing the test; ``run`` gives the
    whole result; ``with_token`` is the same kubectl presenting another bearer token.
    kubectl is a test dependency (``make setup`` installs Debian's when the machine has none):
    a missing one fails the tests rather than skipping them.
    """

    def __init__(self, config: dict[str, Any], directory: Path) -> None:
        binary = shutil.which("kubectl")
        if binary is None:
            pytest.fail(
                "kubectl is not installed: `make setup` installs Debian's kubernetes-client"
            )
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "kubeconfig"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        self.config = config
        self.directory = directory
        self.command = [binary, "--kubeconfig", str(path), "--cache-dir", str(directory / "cache")]

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.command, *args], input=stdin, capture_output=True, text=True, timeout=30
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """kubectl started, its output a pipe to read while it runs (``logs -f``)."""
        return subprocess.Popen(
            [*self.command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        done = self.run(*args, stdin=stdin)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def with_token(self, token: str) -> Kubectl:
        config = {**self.config, "users": [{**self.config["users"][0], "user": {"token": token}}]}
        digest = hashlib.sha256(token.encode()).hexdigest()[:12]
        return Kubectl(config, self.directory.parent / f"kubectl-{digest}")


@pytest.fixture
def kubectl(emulator: KubernetesEmulator, tmp_path: Path) -> Kubectl:
    """The machine's kubectl, pointed at the emulator with its kubeconfig (the admin's)."""
    return Kubectl(emulator.kubeconfig(), tmp_path / "kubectl")


def available_web_deployment(
    apps_v1: kubernetes.client.AppsV1Api, namespace: str, wait_until: WaitUntil, *, replicas: int
) -> None:
    """The Deployment ``web`` (label ``app=web``, an nginx container) with ``replicas`` pods,
    once they are all available."""
    labels = {"app": "web"}
    apps_v1.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
                },
            },
        },
    )
    wait_until(
        lambda: (
            apps_v1.read_namespaced_deployment("web", namespace).status.available_replicas
            == replicas
        )
    )


def served_crd(
    emulator: KubernetesEmulator,
    extensions: kubernetes.client.ApiextensionsV1Api,
    wait_until: WaitUntil,
    plural: str,
) -> ResourceType:
    """Create the operator CRD of ``plural`` through the API; its resource once served."""
    extensions.create_custom_resource_definition(crd(plural))
    resource: ResourceType = wait_until(lambda: emulator.served.by_plural(plural))
    return resource

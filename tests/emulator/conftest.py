"""Fixtures for tests that drive the Kubernetes emulator through the real client.

``emulator`` is a fresh, started emulator per test. Markers tune it:

    @pytest.mark.cluster_settings(pod_termination_seconds=60)   # ClusterSettings fields
    @pytest.mark.watch_history(5)                                # changes kept for watches
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import kubernetes.client
import pytest

from devstack.kube import KubernetesEmulator
from devstack.kube.cluster import ClusterSettings

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

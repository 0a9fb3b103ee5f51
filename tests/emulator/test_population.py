"""A population stored straight into the emulator is what the service would have made.

The scale benchmark measures the service against populations of thousands of labs built by
``devstack.kube.population``; its figures mean something only if those labs are exactly what
spawns leave behind. Read through the real client and reconciled by the service's own
reconcile, a small population must look like 50 running labs and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest
import redis
from flask import Flask

from app import create_app
from app.builders.names import COMPONENT_LABEL, LAB_COMPONENT
from app.config import Config, parse_config
from app.engine.reconcile import Reconciler
from app.extensions.labs import machinery_of
from app.models.images import LabImage
from app.models.lab import PodState
from app.models.workload import WorkloadStatus
from app.workloads.lab.records import lab_record, reachable_at
from app.workloads.lab.store import LabStore
from app.workloads.lab.tracking import LAB_POD_SELECTOR
from devstack.kube import KubernetesEmulator
from devstack.kube.population import Population, lab_spec, populate
from tests.conftest import service_config, simple_image
from tests.support.redis_server import RedisServer

LABS = 50
NODES = 10
IMAGES = (
    simple_image("registry.test/lsstsqre/sciplat-lab:w_2024_42", "Weekly 2024_42"),
    simple_image("registry.test/lsstsqre/sciplat-lab:w_2024_41", "Weekly 2024_41"),
)
INIT_CONTAINER = {
    "name": "provision-home",
    "image": "registry.test/lsstsqre/provision-home:1.0",
    "command": ["/bin/true"],
}


@pytest.fixture
def population_config(redis_server: RedisServer, emulator: KubernetesEmulator) -> Config:
    raw = service_config(
        redis_server.url,
        "http://gafaelfawr.invalid",
        emulator.url,
        lab={
            "sizes": [{"name": "small", "cpu": 1, "memory": "4Gi"}],
            "initContainers": [INIT_CONTAINER],
        },
    )
    return parse_config(raw)


@pytest.fixture
def population() -> Population:
    images = tuple(LabImage(i["url"], i["name"], i["digest"]) for i in IMAGES)
    return Population(labs=LABS, nodes=NODES, images=images, username_format="pop{index:03d}")


@pytest.fixture
def populated(
    emulator: KubernetesEmulator, population_config: Config, population: Population
) -> KubernetesEmulator:
    populate(emulator, population_config, population)
    return emulator


@pytest.fixture
def service(population_config: Config, redis_client: redis.Redis) -> Iterator[Flask]:
    """The service's app, its background work not started: the test drives its reconcile."""
    app = create_app(population_config)
    yield app
    machinery_of(app).registries.close()


def test_objects_read_through_the_client(
    populated: KubernetesEmulator, core_v1: kubernetes.client.CoreV1Api
) -> None:
    pods = core_v1.list_pod_for_all_namespaces(label_selector=LAB_POD_SELECTOR).items
    assert len(pods) == LABS
    nodes = {node.metadata.name for node in core_v1.list_node().items}
    assert len(nodes) == NODES
    for pod in pods:
        assert pod.status.phase == "Running"
        assert pod.spec.node_name in nodes
        ready = {c.type: c.status for c in pod.status.conditions}
        assert ready["Ready"] == "True"
        assert all(c.ready and c.state.running for c in pod.status.container_statuses)
    first_spawns = [p for p in pods if p.spec.init_containers]
    assert first_spawns, "some labs are their user's first, with the provisioning container"
    for pod in first_spawns:
        assert all(c.state.terminated.exit_code == 0 for c in pod.status.init_container_statuses)

    namespace = pods[0].metadata.namespace
    assert core_v1.read_namespace(namespace).status.phase == "Active"
    assert {cm.metadata.name for cm in core_v1.list_namespaced_config_map(namespace).items} >= {
        "kube-root-ca.crt"
    }
    assert core_v1.list_namespaced_secret(namespace).items
    service = core_v1.list_namespaced_service(namespace).items[0]
    assert service.spec.cluster_ip
    reasons = [e.reason for e in core_v1.list_namespaced_event(namespace).items]
    assert reasons[0] == "Scheduled" and "Started" in reasons

    # Every node holds the images, but one in twenty lacks the last one.
    cached = [
        {name for image in node.status.images for name in image.names}
        for node in core_v1.list_node().items
    ]
    last = f"{IMAGES[-1]['url']}@{IMAGES[-1]['digest']}"
    assert sum(last not in names for names in cached) == NODES // 20
    assert all(f"{IMAGES[0]['url']}@{IMAGES[0]['digest']}" in names for names in cached)


def test_nothing_runs(populated: KubernetesEmulator) -> None:
    """The kubelet leaves pods past Pending alone: no status is rewritten, no pod started."""
    before = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in _lab_pods(populated)}
    time.sleep(0.3)
    after = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in _lab_pods(populated)}
    assert after == before


def test_reconcile_rebuilds_exactly_the_running_labs(
    populated: KubernetesEmulator,
    population_config: Config,
    population: Population,
    service: Flask,
    redis_client: redis.Redis,
) -> None:
    machinery = machinery_of(service)
    kinds = list(machinery.engine.kinds.values())
    reconciler = Reconciler(machinery.engine.store, machinery.context.kube, kinds)
    assert reconciler.run()

    labs = LabStore.reading(redis_client, population_config.redis.key_prefix)
    names = {population.username(index) for index in range(LABS)}
    assert set(machinery.engine.store.names("lab")) == names
    size = population_config.lab.sizes[0].name
    for index in range(LABS):
        spec = lab_spec(population_config, population, index, size)
        url = reachable_at(machinery.context.kube, population_config, spec.username)
        expected = lab_record(
            spec, population_config, status=WorkloadStatus.RUNNING, pod=PodState.PRESENT, url=url
        )
        assert labs.get(spec.username) == expected

    # In step: a second pass finds nothing to repair and deletes nothing.
    populated.audit.clear()
    assert reconciler.run()
    assert not [e for e in populated.audit.entries() if e.verb not in ("list", "get")]
    assert len(_lab_pods(populated)) == LABS


def test_a_populated_pod_deleted_goes_like_any_other(
    populated: KubernetesEmulator, core_v1: kubernetes.client.CoreV1Api
) -> None:
    """The cluster knows every stored object: a pod deleted through the API terminates."""
    pod = _lab_pods(populated)[0]["metadata"]
    core_v1.delete_namespaced_pod(pod["name"], pod["namespace"], grace_period_seconds=0)
    deadline = time.monotonic() + 5
    while populated.store.get("pods", pod["namespace"], pod["name"]) is not None:
        assert time.monotonic() < deadline, "the deleted pod was never removed"
        time.sleep(0.01)


def _lab_pods(kube: KubernetesEmulator) -> list[dict[str, Any]]:
    return [
        p
        for p in kube.store.list("pods")
        if (p["metadata"].get("labels") or {}).get(COMPONENT_LABEL) == LAB_COMPONENT
    ]

"""Cluster records follow Kubernetes between operations: a head pod made again by its
operator changes nothing, a cluster gone with its lab's namespace is recorded as failed with
the reason, and records Redis lost are rebuilt from the cluster objects."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from app.workloads.cluster.tracking import GONE_ERROR
from devstack.kube import KubernetesEmulator
from devstack.kube.cluster.programs import ImageProgram
from tests.clusters.conftest import create, running, with_lab
from tests.labs.conftest import LabUser, read_events, wait_for
from tests.labs.test_recovery import NEVER, leading


@pytest.fixture
def watched(cluster_config: dict[str, Any], make_app: Callable[[Config], Flask]) -> Flask:
    raw = {
        **cluster_config,
        "watcher": {"leaseSeconds": 1, "watchSeconds": 2, "reconcileSeconds": NEVER},
    }
    app = make_app(parse_config(raw))
    leading(app)
    return app


def _cluster(client: FlaskClient, user: LabUser, name: str) -> dict[str, Any]:
    response = client.get(f"/spawner/v1/labs/{user.username}/clusters/{name}", headers=user.headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    body: dict[str, Any] = response.get_json()
    return body


def test_a_head_made_again_changes_nothing_and_a_cluster_gone_with_its_lab_fails(
    watched: Flask,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    client = watched.test_client()
    user = new_user()
    with_lab(client, user)
    name = create(client, user, workers=1).get_json()["name"]
    before = running(client, user, name)
    namespace = before["namespace"]

    heads = [
        p
        for p in kube.store.list("pods", namespace)
        if p["metadata"]["labels"].get("lab-spawner.jupyter.org/cluster-role") == "head"
    ]
    assert len(heads) == 1
    kube.store.delete("pods", namespace, heads[0]["metadata"]["name"])
    wait_for(
        lambda: [
            p
            for p in kube.store.list("pods", namespace)
            if p["metadata"]["labels"].get("lab-spawner.jupyter.org/cluster-role") == "head"
        ]
    )
    assert _cluster(client, user, name) == before

    assert (
        client.delete(f"/spawner/v1/labs/{user.username}", headers=admin_headers).status_code == 202
    )
    # The cluster went before the namespace, let go by its operator (whose finalizer it
    # carried) while the namespace still took writes; then the namespace went too.
    deletion = read_events(client, user.username, user.headers)
    assert deletion[-1].type == "complete", deletion
    infos = [e.data for e in deletion if e.type == "info"]
    assert infos.index("Waiting for the operators to let the lab's clusters go") < infos.index(
        "Stopping the lab and removing its namespace"
    )
    assert kube.store.get("namespaces", None, namespace) is None
    collections = kube.audit.entries(verb="deletecollection", namespace=namespace)
    assert "daskclusters" in {entry.resource for entry in collections}

    def failed() -> dict[str, Any] | None:
        record = _cluster(client, user, name)
        return record if record["status"] == "failed" else None

    record = wait_for(failed)
    assert record["error"] == GONE_ERROR
    # A failed cluster holds nothing of the budget, and its record goes when deleted.
    assert (
        client.delete(
            f"/spawner/v1/labs/{user.username}/clusters/{name}", headers=user.headers
        ).status_code
        == 202
    )
    wait_for(
        lambda: (
            client.get(
                f"/spawner/v1/labs/{user.username}/clusters/{name}", headers=user.headers
            ).status_code
            == 404
        )
    )


def test_cluster_records_are_rebuilt_after_redis_lost_them(
    watched: Flask, new_user: Callable[..., LabUser], redis_client: redis.Redis
) -> None:
    client = watched.test_client()
    user = new_user()
    with_lab(client, user)
    name = create(
        client, user, kind="rayclusters", workers=2, max_workers=3, worker_tier="small"
    ).get_json()["name"]
    before = running(client, user, name)

    redis_client.flushall()

    def rebuilt() -> dict[str, Any] | None:
        response = client.get(
            f"/spawner/v1/labs/{user.username}/clusters/{name}", headers=user.headers
        )
        # Unknown while the rebuild runs, never a false "no such cluster".
        assert response.status_code in (200, 503), response.get_data(as_text=True)
        return response.get_json() if response.status_code == 200 else None

    assert wait_for(rebuilt) == before


def test_a_running_cluster_whose_head_crash_loops_fails_with_the_reason(
    watched: Flask,
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
) -> None:
    """Not an injected fault: the head's image runs a real process that exits with code 3,
    the kubelet restarts it with back-off, and the cluster's record fails on the crash loop
    with the last exit code, instead of reading running for ever."""
    client = watched.test_client()
    user = new_user()
    with_lab(client, user)
    name = create(client, user, workers=1).get_json()["name"]
    namespace = running(client, user, name)["namespace"]
    crash = "import sys; print('the scheduler cannot start'); sys.exit(3)"
    kube.cluster.settings.programs = {
        "*/lsstsqre/sciplat-lab": ImageProgram(entrypoint=(sys.executable, "-c", crash))
    }
    try:
        for pod in kube.store.list("pods", namespace):
            if pod["metadata"]["labels"].get("lab-spawner.jupyter.org/cluster-role") == "head":
                kube.store.delete("pods", namespace, pod["metadata"]["name"])
        failed = wait_for(
            lambda: (body := _cluster(client, user, name))["status"] == "failed" and body,
            timeout=30,
        )
    finally:
        kube.cluster.settings.programs = {}
    assert "keeps crashing (CrashLoopBackOff, last exit code 3)" in failed["error"], failed

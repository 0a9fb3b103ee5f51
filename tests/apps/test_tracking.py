"""App records follow Kubernetes between operations: an app whose pod crashes is in Error
with the reason, one whose Deployment went behind the service's back says so, and records
Redis lost (a stopped app's too, which has no pod) are rebuilt from the Deployments."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
import redis
from flask import Flask

from app.config import Config, parse_config
from app.workloads.app.tracking import GONE_MESSAGE
from devstack.kube import KubernetesEmulator
from devstack.kube.cluster.programs import ImageProgram
from tests.apps.conftest import app_of, create, in_phase
from tests.apps.test_routes import Member, namespace_of
from tests.labs.conftest import wait_for
from tests.labs.test_recovery import NEVER, leading


@pytest.fixture
def watched(apps_config: dict[str, Any], make_app: Callable[[Config], Flask]) -> Flask:
    raw = {
        **apps_config,
        "watcher": {"leaseSeconds": 1, "watchSeconds": 2, "reconcileSeconds": NEVER},
    }
    app = make_app(parse_config(raw))
    leading(app)
    return app


def test_a_crash_or_a_deployment_gone_behind_the_service_is_an_error(
    watched: Flask, kube: KubernetesEmulator, new_group: Callable[[], str], member: Member
) -> None:
    client = watched.test_client()
    group = new_group()
    user = member(group)
    crashing = create(client, user, group).get_json()["id"]
    gone = create(client, user, group).get_json()["id"]
    in_phase(client, user, crashing, "Ready")
    in_phase(client, user, gone, "Ready")

    # The app's process starts crashing: its pod is made again and keeps failing.
    kube.cluster.faults.set("crash_loop", "*/apps/dashboard:*", "segmentation fault")
    try:
        namespace = namespace_of(group)
        (pod,) = [
            p
            for p in kube.store.list("pods", namespace)
            if p["metadata"]["labels"].get("lab-spawner.jupyter.org/app") == crashing
        ]
        kube.store.delete("pods", namespace, pod["metadata"]["name"])
        failed = in_phase(client, user, crashing, "Error")
    finally:
        kube.cluster.faults.clear("crash_loop")
    assert "keeps crashing" in failed["message"]

    kube.store.delete("deployments", namespace_of(group), f"app-{gone}")
    assert in_phase(client, user, gone, "Error")["message"] == GONE_MESSAGE


def test_app_records_are_rebuilt_after_redis_lost_them(
    watched: Flask,
    redis_client: redis.Redis,
    new_group: Callable[[], str],
    member: Member,
) -> None:
    client = watched.test_client()
    group = new_group()
    user = member(group)
    running = create(client, user, group, scope="public").get_json()["id"]
    stopped = create(client, user, group, env={"TITLE": "Old", "EXTRA": "1"}).get_json()["id"]
    in_phase(client, user, running, "Ready")
    in_phase(client, user, stopped, "Ready")
    assert client.post(f"/spawner/v1/apps/{stopped}/stop", headers=user.headers).status_code == 202
    before = {
        app_id: in_phase(client, user, app_id, phase)
        for app_id, phase in (
            (running, "Ready"),
            (stopped, "Stopped"),
        )
    }

    redis_client.flushall()

    def rebuilt(app_id: str) -> dict[str, Any] | None:
        response = client.get(f"/spawner/v1/apps/{app_id}", headers=user.headers)
        assert response.status_code in (200, 503), response.get_data(as_text=True)
        return response.get_json() if response.status_code == 200 else None

    for app_id, was in before.items():
        now = wait_for(lambda app_id=app_id: rebuilt(app_id))
        was.pop("seen")
        assert now == was
    assert app_of(client, user, stopped)["env"] == {"TITLE": "Old", "EXTRA": "1"}


def test_an_app_whose_process_keeps_crashing_is_in_error_with_its_exit_code(
    watched: Flask, kube: KubernetesEmulator, new_group: Callable[[], str], member: Member
) -> None:
    """Not an injected fault: the app's image runs a real process that exits with code 4,
    the kubelet restarts it with back-off, and the app reads Error with the last exit code."""
    client = watched.test_client()
    group = new_group()
    user = member(group)
    crash = "import sys; print('the app cannot start'); sys.exit(4)"
    kube.cluster.settings.programs = {
        "*/apps/dashboard": ImageProgram(entrypoint=(sys.executable, "-c", crash))
    }
    try:
        app_id = create(client, user, group).get_json()["id"]
        failed = in_phase(client, user, app_id, "Error")
    finally:
        kube.cluster.settings.programs = {}
    assert "keeps crashing (CrashLoopBackOff, last exit code 4)" in failed["message"], failed

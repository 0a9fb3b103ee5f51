"""File servers follow Kubernetes between operations: a server that exits by itself (its
idle timeout) or whose Job is deleted behind the service has its objects and record
removed; a server that cannot start fails fast and is cleaned up; records Redis lost are
rebuilt from the Jobs, and a new instance of the service keeps them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from app.engine.reconcile import Reconciler
from app.extensions.labs import machinery_of, stop_background
from app.models.workload import WorkloadRef
from app.workloads.fileserver.tracking import GONE
from devstack.kube import KubernetesEmulator
from devstack.kube.cluster.programs import ImageProgram
from tests.fileservers.conftest import NAMESPACE, gone, job_of, start, wait_for
from tests.labs.conftest import LabUser, read_stream

SERVES_THEN_EXITS = """
import os, socket, time
server = socket.create_server((os.environ["POD_IP"], int(os.environ["FILESERVER_PORT"])))
print("serving", flush=True)
time.sleep(float(os.environ["SERVE_SECONDS"]))
print("idle: stopping", flush=True)
"""
"""A stand-in for the server's idle end: it accepts connections (its readiness probe
passes), then exits 0 as the real server does after its idle timeout."""


@pytest.fixture
def exits_after(kube: KubernetesEmulator) -> Iterator[Callable[[float], None]]:
    """Make the file-server image a process that serves for ``seconds``, then exits 0."""

    def run(seconds: float) -> None:
        kube.cluster.settings.programs = {
            "*/lsstsqre/fileserver": ImageProgram(
                entrypoint=(sys.executable, "-c", SERVES_THEN_EXITS),
                env={"SERVE_SECONDS": str(seconds)},
            )
        }

    yield run
    kube.cluster.settings.programs = {}


def _status(client: FlaskClient, user: LabUser) -> int:
    return int(client.get("/fileserver/v1/user-status", headers=user.headers).status_code)


def test_a_server_that_stops_by_itself_is_removed_with_its_objects(
    client: FlaskClient,
    kube: KubernetesEmulator,
    files_user: Callable[..., LabUser],
    exits_after: Callable[[float], None],
) -> None:
    exits_after(4)
    user = files_user()
    assert start(client, user).status_code == 200
    assert _status(client, user) == 200
    wait_for(lambda: gone(kube, user.username), timeout=30)
    wait_for(lambda: _status(client, user) == 404)
    events = read_stream(client, f"/spawner/v1/fileservers/{user.username}/events", user.headers)
    assert "stopped by itself" in events[0].data
    assert events[-1].type == "complete"

    # Asked again, it starts anew.
    assert start(client, user).status_code == 200
    assert _status(client, user) == 200


def test_a_job_deleted_behind_the_service_takes_the_rest_with_it(
    client: FlaskClient, kube: KubernetesEmulator, files_user: Callable[..., LabUser]
) -> None:
    user = files_user()
    assert start(client, user).status_code == 200
    kube.store.delete("jobs", NAMESPACE, f"{user.username}-fs")
    wait_for(lambda: gone(kube, user.username), timeout=30)
    wait_for(lambda: _status(client, user) == 404)


def test_a_server_that_cannot_start_fails_at_once_and_is_cleaned_up(
    client: FlaskClient, kube: KubernetesEmulator, files_user: Callable[..., LabUser]
) -> None:
    user = files_user()
    kube.cluster.faults.set("crash_loop", "*/lsstsqre/fileserver:*", "segmentation fault")
    try:
        failed = start(client, user)
    finally:
        kube.cluster.faults.clear("crash_loop")
    assert failed.status_code == 500
    body = failed.get_json()
    assert body["code"] == "fileserver_failed"
    assert "could not start" in body["message"] and "keeps crashing" in body["message"]
    record = client.get(f"/spawner/v1/fileservers/{user.username}", headers=user.headers)
    assert record.status_code in (200, 404)  # failed, until the watcher removes it
    wait_for(lambda: gone(kube, user.username), timeout=30)
    assert start(client, user).status_code == 200


def test_records_come_back_after_redis_lost_them_and_in_a_new_instance(
    client: FlaskClient,
    files_app: Flask,
    redis_client: redis.Redis,
    kube: KubernetesEmulator,
    files_user: Callable[..., LabUser],
    fileserver_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    admin_headers: dict[str, str],
) -> None:
    user = files_user()
    assert start(client, user).status_code == 200
    uid = job_of(kube, user.username)["metadata"]["uid"]  # type: ignore[index]
    before = client.get(f"/spawner/v1/fileservers/{user.username}", headers=user.headers)

    redis_client.flushall()

    def listed() -> bool:
        answer = client.get("/fileserver/v1/users", headers=admin_headers)
        return answer.status_code == 200 and user.username in answer.get_json()

    wait_for(listed, timeout=30)
    after = client.get(f"/spawner/v1/fileservers/{user.username}", headers=user.headers)
    assert after.get_json()["status"] == "running"
    assert after.get_json()["username"] == before.get_json()["username"]

    # Another instance of the service (a restart) answers the same, and serves it at once.
    other = make_app(parse_config(fileserver_raw_config)).test_client()
    again = other.get("/files", headers={**user.headers, "Accept": "application/json"})
    assert again.status_code == 200
    assert job_of(kube, user.username)["metadata"]["uid"] == uid  # type: ignore[index]


def test_the_reconcile_ends_what_the_watch_missed(
    client: FlaskClient,
    files_app: Flask,
    kube: KubernetesEmulator,
    files_user: Callable[..., LabUser],
    fileserver_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
) -> None:
    """With no watch running (its leader gone), the reconcile finds a server whose Job is
    gone and asks the engine to end it, with why."""
    user = files_user()
    assert start(client, user).status_code == 200
    machinery = machinery_of(files_app)
    stop_background(files_app)
    kube.store.delete("jobs", NAMESPACE, f"{user.username}-fs")
    ended: list[tuple[WorkloadRef, str]] = []
    reconciler = Reconciler(
        machinery.engine.store,
        machinery.context.kube,
        machinery.engine.kinds.values(),
        end=lambda ref, *, reason: ended.append((ref, reason)),
    )
    reconciler.run()
    assert ended == [(WorkloadRef("fileserver", user.username), GONE)]
    # Another instance takes over, and removes the rest.
    make_app(parse_config(fileserver_raw_config))
    wait_for(lambda: gone(kube, user.username), timeout=30)

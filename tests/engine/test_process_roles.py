"""The web and runner roles apart: a web process queues and announces, a runner runs.

Both processes are apps of this test, with their own Redis pools and event hubs, as two
gunicorn masters of a replica are; the runner's scan period is out of reach, so what starts
an operation is the notice (or, for one queued before the runner subscribed, the catch-up
scan its subscription triggers), never the periodic scan.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from flask import Flask

from app import create_app
from app.config import Config, parse_config
from app.extensions.labs import machinery_of, start_background, stop_background
from app.models.process_role import ROLE_ENV, ProcessRole
from app.models.workload import WorkloadRef
from devstack.stack import REPO_ROOT
from tests.conftest import await_complete_state
from tests.labs.conftest import LabUser, read_events, spawn_body
from tests.labs.test_recovery import NEVER

pytestmark = pytest.mark.usefixtures("new_user")


@pytest.fixture
def config(lab_raw_config: dict[str, Any]) -> Config:
    raw = copy.deepcopy(lab_raw_config)
    raw["operations"]["scanSeconds"] = NEVER
    return parse_config(raw)


@pytest.fixture
def apps(config: Config) -> Iterator[dict[ProcessRole, Flask]]:
    made = {role: create_app(config, role=role) for role in (ProcessRole.WEB, ProcessRole.RUNNER)}
    yield made
    for app in made.values():
        stop_background(app)


def _spawn(web: Flask, user: LabUser) -> None:
    response = web.test_client().post(
        f"/spawner/v1/labs/{user.username}/spawn", json=spawn_body(), headers=user.headers
    )
    assert response.status_code == 303, response.get_data(as_text=True)


def _complete(web: Flask, user: LabUser) -> None:
    events = read_events(web.test_client(), user.username, user.headers)
    assert events[-1].type == "complete", [e.data for e in events]


def test_the_web_queues_and_announces_and_the_runner_runs(
    apps: dict[ProcessRole, Flask], config: Config, new_user: Any, redis_client: redis.Redis
) -> None:
    web, first_runner = apps[ProcessRole.WEB], apps[ProcessRole.RUNNER]
    # A runner's watcher makes the state complete (until then the web answers 503
    # ``rebuilding``); then it stops, as a runner restarting does.
    start_background(first_runner, ProcessRole.RUNNER)
    await_complete_state(first_runner)
    stop_background(first_runner)
    start_background(web, ProcessRole.WEB)
    notices = redis_client.pubsub()
    channel = machinery_of(web).engine.runner.channel
    notices.subscribe(channel)
    assert notices.get_message(timeout=5)["type"] == "subscribe"  # type: ignore[index]

    # No runner yet: the spawn is queued and announced, and the web process runs nothing.
    early = new_user()
    _spawn(web, early)
    ref = WorkloadRef("lab", early.username)
    assert machinery_of(web).engine.runner.running() == 0
    store = machinery_of(web).engine.store
    assert ref in store.pending()
    message = notices.get_message(timeout=5)
    assert message is not None and message["data"] == ref.key

    # A runner that subscribes later catches up at once: its scan period is an hour.
    runner = create_app(config, role=ProcessRole.RUNNER)
    start_background(runner, ProcessRole.RUNNER)
    try:
        _complete(web, early)
        # With the runner listening, the notice starts the next spawn.
        later = new_user()
        _spawn(web, later)
        assert machinery_of(web).engine.runner.running() == 0
        _complete(web, later)
        assert WorkloadRef("lab", later.username) not in store.pending()
        client = web.test_client()
        status = client.get("/spawner/v1/user-status", headers=later.headers)
        assert status.status_code == 200
        # The web answered every request from Redis: it never built a Kubernetes client
        # (nor loaded the library for one); the runner built its own as it started.
        assert not machinery_of(web).context.kube.connection.opened
        assert machinery_of(runner).context.kube.connection.opened
    finally:
        stop_background(runner)
        notices.close()


def test_the_kubernetes_api_is_in_the_runners_readiness_only(
    apps: dict[ProcessRole, Flask],
) -> None:
    """The web's readiness is what it answers from; the runner's adds the API it calls."""
    web, runner = apps[ProcessRole.WEB], apps[ProcessRole.RUNNER]
    start_background(runner, ProcessRole.RUNNER)
    await_complete_state(runner)
    answers = {role: app.test_client().get("/readyz").get_json() for role, app in apps.items()}
    assert answers[ProcessRole.WEB]["checks"] == {"redis": "ok", "state": "ok", "images": "ok"}
    assert answers[ProcessRole.RUNNER]["checks"]["kubernetes"] == "ok"
    assert not machinery_of(web).context.kube.connection.opened
    assert machinery_of(runner).context.kube.connection.opened


def test_only_the_runner_stands_for_the_elected_loops(apps: dict[ProcessRole, Flask]) -> None:
    web, runner = apps[ProcessRole.WEB], apps[ProcessRole.RUNNER]
    start_background(web, ProcessRole.WEB)
    start_background(runner, ProcessRole.RUNNER)
    await_complete_state(runner)
    assert machinery_of(runner).watcher.is_leader
    assert not machinery_of(web).watcher.is_leader


def test_a_runners_port_answers_probes_and_metrics_only(apps: dict[ProcessRole, Flask]) -> None:
    client = apps[ProcessRole.RUNNER].test_client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/metrics").status_code == 200
    response = client.get("/spawner/v1/labs")
    assert response.status_code == 404
    # The web role serves the API.
    assert apps[ProcessRole.WEB].test_client().get("/spawner/v1/labs").status_code == 401


def test_a_runner_process_does_not_import_the_apis_routes() -> None:
    """What a runner's port does not serve, its process does not load: a fresh interpreter
    builds each role's app and lists the route modules it imported."""
    imported = {}
    for role in (ProcessRole.RUNNER, ProcessRole.WEB):
        code = (
            "import sys; from app import create_app; from app.models.process_role import "
            f"ProcessRole; create_app(role=ProcessRole({role.value!r})); "
            "print(*sorted(m for m in sys.modules if m.startswith('blueprints.')))"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPAWNER_")}
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        imported[role] = set(result.stdout.split())
    assert imported[ProcessRole.RUNNER] == {"blueprints.health", "blueprints.metrics"}
    assert "blueprints.spawner" in imported[ProcessRole.WEB]


@pytest.mark.parametrize(
    ("value", "role"),
    [("web", ProcessRole.WEB), (" Runner ", ProcessRole.RUNNER), ("", ProcessRole.ALL)],
)
def test_the_role_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, role: ProcessRole
) -> None:
    monkeypatch.setenv(ROLE_ENV, value)
    assert ProcessRole.from_environment() is role


def test_an_unknown_role_is_refused_with_the_allowed_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ROLE_ENV, "worker")
    with pytest.raises(ValueError, match="use one of web, runner, all"):
        ProcessRole.from_environment()

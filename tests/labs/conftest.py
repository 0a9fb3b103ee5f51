"""Fixtures for lab tests: fresh users, an app with fast operations, event readers."""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from devstack.gafaelfawr import GafaelfawrEmulator, GroupSpec, UserSpec
from devstack.kube import KubernetesEmulator
from tests.conftest import bearer, service_config, simple_image
from tests.support.redis_server import RedisServer
from tests.support.sse import SseEvent, parse_sse

IMAGE = "registry.test/lsstsqre/sciplat-lab:w_2024_42"
BAD_IMAGE = "registry.test/lsstsqre/sciplat-lab:broken"
_counter = itertools.count(1)


@dataclass(frozen=True)
class LabUser:
    username: str
    token: str
    uid: int
    gid: int

    @property
    def headers(self) -> dict[str, str]:
        return bearer(self.token)


def lab_config(redis_url: str, gafaelfawr_url: str, kube_url: str) -> dict[str, Any]:
    raw = service_config(redis_url, gafaelfawr_url, kube_url)
    images = raw["prepull"][0]["images"]
    images.append(simple_image(BAD_IMAGE, "Broken"))
    # An image no node has cached: pulls (and pull faults) really happen for it.
    fresh = f"registry.test/lsstsqre/sciplat-lab:fresh-{time.time_ns()}"
    images.append(simple_image(fresh, "Fresh"))
    raw["lab"]["spawnTimeout"] = 30
    raw["lab"]["deleteTimeout"] = 30
    raw["operations"] = {"leaseSeconds": 2, "scanSeconds": 0.2, "keepaliveSeconds": 0.5}
    raw["redis"]["socketTimeout"] = 3
    return raw


@pytest.fixture
def lab_raw_config(
    redis_client: Any,
    redis_server: RedisServer,
    gafaelfawr: GafaelfawrEmulator,
    kube: KubernetesEmulator,
) -> dict[str, Any]:
    return lab_config(redis_server.url, gafaelfawr.url, kube.url)


@pytest.fixture
def fresh_image(lab_raw_config: dict[str, Any]) -> str:
    """An image of this test's configuration that no node has pulled yet."""
    reference: str = lab_raw_config["prepull"][0]["images"][-1]["url"]
    return reference


@pytest.fixture
def slow_image(
    lab_raw_config: dict[str, Any], kube: KubernetesEmulator
) -> Iterator[Callable[[float], str]]:
    """Adds to this test's configuration (before its app is made) an image no node has,
    whose pull takes the given seconds; the emulator's pull times are reset afterwards."""
    pulls = kube.cluster.settings.pull_seconds_by_image

    def add(pull_seconds: float) -> str:
        image = f"registry.test/lsstsqre/sciplat-lab:slow-{time.time_ns()}"
        lab_raw_config["prepull"][0]["images"].append(simple_image(image, "Slow"))
        pulls[f"{image}*"] = pull_seconds
        return image

    yield add
    pulls.clear()


@pytest.fixture
def lab_app(lab_raw_config: dict[str, Any], make_app: Callable[[Config], Flask]) -> Flask:
    return make_app(parse_config(lab_raw_config))


@pytest.fixture
def lab_client(lab_app: Flask) -> FlaskClient:
    return lab_app.test_client()


@pytest.fixture
def new_user(
    gafaelfawr: GafaelfawrEmulator, kube: KubernetesEmulator
) -> Iterator[Callable[..., LabUser]]:
    """Register a user nobody else uses, so tests on the shared cluster never collide.

    After the test, the pods in its users' lab namespaces go: the session's three nodes
    are shared by every test, and a lab a test left running (or a failed lab's pod that
    was scheduled once its fault was cleared) would hold room later spawns need."""
    made: list[str] = []

    def make(
        groups: tuple[GroupSpec, ...] | None = None, scopes: tuple[str, ...] = ("exec:notebook",)
    ) -> LabUser:
        n = next(_counter)
        username = f"user{n}-{int(time.time() * 1000) % 100000}"
        uid = 20000 + n
        gid = 30000 + n
        if groups is None:
            groups = (GroupSpec(username, gid), GroupSpec("science", 2002), GroupSpec("no-gid"))
        gafaelfawr.add_user(UserSpec(username=username, uid=uid, gid=gid, groups=groups))
        token = gafaelfawr.issue_token(username, list(scopes), token_type="notebook")
        made.append(username)
        return LabUser(username, token, uid, gid)

    yield make
    for username in made:
        namespace = f"nublado-{username}"
        for pod in kube.store.list("pods", namespace):
            kube.store.delete("pods", namespace, pod["metadata"]["name"])


def spawn_body(image: str = IMAGE, size: str = "small", **extra: Any) -> dict[str, Any]:
    return {
        "options": {"image": image, "size": size, **extra},
        "env": {"JUPYTERHUB_API_URL": "http://hub:8081/hub/api"},
    }


def read_events(
    client: FlaskClient, username: str, headers: dict[str, str], last_id: str | None = None
) -> list[SseEvent]:
    """Read the user's event stream until the server closes it."""
    return read_stream(client, f"/spawner/v1/labs/{username}/events", headers, last_id)


def read_stream(
    client: FlaskClient, path: str, headers: dict[str, str], last_id: str | None = None
) -> list[SseEvent]:
    """Read a workload's event stream at ``path`` until the server closes it."""
    if last_id is not None:
        headers = {**headers, "Last-Event-ID": last_id}
    response = client.get(path, headers=headers, buffered=False)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "text/event-stream"
    try:
        return [e for e in parse_sse(response.response) if isinstance(e, SseEvent)]  # type: ignore[arg-type]
    finally:
        response.close()


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05) -> Any:
    """Poll until ``predicate`` returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)


@pytest.fixture
def admin_headers(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["admin"])


def config_of(app: Flask) -> Config:
    config: Config = app.config["SPAWNER"]
    return config


MakeApp = Callable[..., Flask]


@pytest.fixture
def watcher_app(lab_raw_config: dict[str, Any], make_app: Callable[[Config], Flask]) -> MakeApp:
    """Build an app whose watcher uses the given settings (camelCase config keys)."""

    def make(raw: dict[str, Any] | None = None, **watcher: float) -> Flask:
        config = copy.deepcopy(raw if raw is not None else lab_raw_config)
        config["watcher"] = {"leaseSeconds": 1, "watchSeconds": 2, **watcher}
        return make_app(parse_config(config))

    return make

"""Fixtures for fair admission: apps with few places, users in chosen groups, spawns that
hold a place until deleted, and a log of admissions in the order Redis made them."""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from app.engine.admission import STARTED_TEXT
from devstack.gafaelfawr import GafaelfawrEmulator, GroupSpec, UserSpec
from devstack.kube import KubernetesEmulator
from tests.conftest import bearer, simple_image
from tests.labs.conftest import lab_config, spawn_body
from tests.support.redis_server import RedisServer

_counter = itertools.count(1)

PREFIX = "spawner:"
"""The key prefix of the tests' configuration (the default)."""


@dataclass(frozen=True)
class Member:
    """A user whose primary group (the group with their GID) is ``group``."""

    username: str
    group: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return bearer(self.token)


@pytest.fixture
def admin_headers(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["admin"])


@pytest.fixture
def raw_config(
    redis_client: redis.Redis,
    redis_server: RedisServer,
    gafaelfawr: GafaelfawrEmulator,
    kube: KubernetesEmulator,
) -> dict[str, Any]:
    raw = lab_config(redis_server.url, gafaelfawr.url, kube.url)
    raw["limits"] = {"mutationsPerMinute": 1000}
    return raw


@pytest.fixture
def admission_app(
    raw_config: dict[str, Any], make_app: Callable[[Config], Flask]
) -> Callable[..., FlaskClient]:
    """A test client of an app with fair admission (camelCase ``admission`` settings), and
    any other section given replacing the test configuration's."""

    def make(admission: dict[str, Any], **sections: dict[str, Any]) -> FlaskClient:
        raw = copy.deepcopy(raw_config)
        raw["admission"] = admission
        for name, section in sections.items():
            raw[name] = {**raw.get(name, {}), **section}
        return make_app(parse_config(raw)).test_client()

    return make


_GIDS: dict[str, int] = {}
"""Each group's GID, the same for every member across tests."""


@pytest.fixture
def member(gafaelfawr: GafaelfawrEmulator) -> Callable[[str], Member]:
    """A new user whose primary group is the named one."""

    def make(group: str) -> Member:
        n = next(_counter)
        username = f"adm{n}-{int(time.time() * 1000) % 100000}"
        gid = _GIDS.setdefault(group, 50000 + len(_GIDS))
        gafaelfawr.add_user(
            UserSpec(username=username, uid=60000 + n, gid=gid, groups=(GroupSpec(group, gid),))
        )
        token = gafaelfawr.issue_token(username, ["exec:notebook"], token_type="notebook")
        return Member(username, group, token)

    return make


@pytest.fixture
def held_image(raw_config: dict[str, Any], kube: KubernetesEmulator) -> Iterator[str]:
    """An image of this test's configuration whose pull takes a minute: a spawn of it holds
    its place until it is deleted (the test's spawn timeout is 30 s, far beyond the test)."""
    image = f"registry.test/lsstsqre/sciplat-lab:held-{time.time_ns()}"
    raw_config["prepull"][0]["images"].append(simple_image(image, "Held"))
    pulls = kube.cluster.settings.pull_seconds_by_image
    pulls[f"{image}*"] = 60.0
    yield image
    pulls.pop(f"{image}*", None)


def spawn(client: FlaskClient, user: Member, image: str | None = None) -> int:
    body = spawn_body(image) if image else spawn_body()
    response = client.post(
        f"/spawner/v1/labs/{user.username}/spawn", json=body, headers=user.headers
    )
    return response.status_code


class AdmissionLog:
    """The workloads admitted from the queue, in the order the admission passes admitted
    them: each pass publishes its "starting" events in order on the events channel."""

    def __init__(self, client: redis.Redis) -> None:
        # Subscription confirmations are read and skipped here: ignoring them in redis-py
        # would return None for them, like "nothing yet".
        self._pubsub = client.pubsub()
        self._pubsub.subscribe(f"{PREFIX}events-published")
        self.admitted: list[str] = []

    def read(self) -> list[str]:
        """Everything published so far."""
        while True:
            message = self._pubsub.get_message(timeout=0.01)
            if message is None:
                return self.admitted
            if message["type"] != "message":
                continue
            subject, _, kind, data = str(message["data"]).split("\n", 3)
            if kind == "info" and data == STARTED_TEXT:
                self.admitted.append(subject.removeprefix("lab:"))

    def close(self) -> None:
        self._pubsub.close()


@pytest.fixture
def admission_log(redis_client: redis.Redis) -> Iterator[AdmissionLog]:
    log = AdmissionLog(redis_client)
    yield log
    log.close()

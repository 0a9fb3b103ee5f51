"""The runner killed in the middle of an admitted spawn: the spawn keeps its place while
the runner started after it resumes it, and once it is done the place goes to the one
waiting. Real processes, one place."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import requests

from app.engine.admission import STARTED_TEXT
from devstack.stack import LocalStack, StackOptions
from tests.support.sse import SseEvent, parse_sse


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("devstack-admission"),
        workers=2,
        # What the killed runner was doing, its successor (started again, as the kubelet
        # would) takes over.
        # Long enough for the test to find and kill the runner running the spawn.
        pull_seconds=3.0,
        start_seconds=1.0,
        config_overrides={
            "operations": {"leaseSeconds": 2, "scanSeconds": 0.5},
            "limits": {"mutationsPerMinute": 1000},
            "admission": {"maxInProgress": 1},
        },
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()


def _wait(predicate: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def _events(base: str, user: str, headers: dict[str, str]) -> list[SseEvent]:
    with requests.get(f"{base}/labs/{user}/events", headers=headers, stream=True, timeout=60) as r:
        assert r.status_code == 200
        return [e for e in parse_sse(r.iter_content(None)) if isinstance(e, SseEvent)]


def test_a_killed_workers_spawn_keeps_its_place_then_hands_it_on(stack: LocalStack) -> None:
    tokens = stack.state()["tokens"]
    headers = {name: {"Authorization": f"Bearer {tokens[name]['token']}"} for name in tokens}
    base = f"{stack.spawner_url}/spawner/v1"
    store = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    body = {"options": {"image": stack.demo_image, "size": "small"}, "env": {}}

    def spawn(user: str) -> None:
        response = requests.post(
            f"{base}/labs/{user}/spawn",
            json=body,
            headers=headers[user],
            allow_redirects=False,
            timeout=10,
        )
        assert response.status_code == 303, response.text

    spawn("rachel")
    spawn("wile")
    waiting = store.zrange("spawner:admission:queue", 0, -1)
    assert len(waiting) == 1 and "\nlab:wile\n" in waiting[0]
    _wait(lambda: stack.kube.store.get("pods", "nublado-rachel", "nb-rachel-lab"))
    holder = str(_wait(lambda: store.get("spawner:lease:lab:rachel")))
    os.kill(int(holder.split(":")[1]), signal.SIGKILL)
    # The place is the spawn's, not the worker's: it is still taken, and wile still waits.
    assert list(store.hgetall("spawner:admission:running")) == ["lab:rachel"]
    assert store.zcard("spawner:admission:queue") == 1

    resumed = _events(base, "rachel", headers["rachel"])
    assert resumed[-1].type == "complete"
    events = _events(base, "wile", headers["wile"])
    assert events[-1].type == "complete", events[-1].data
    infos = [event.data for event in events if event.type == "info"]
    assert "Waiting for a place to start: number 1 in the queue" in infos
    assert infos.index(STARTED_TEXT) > infos.index(
        "Waiting for a place to start: number 1 in the queue"
    )
    assert store.zcard("spawner:admission:queue") == 0
    for user in ("rachel", "wile"):
        requests.delete(f"{base}/labs/{user}", headers=headers["admin"], timeout=10)

"""Killing the worker that runs a spawn: another worker resumes it, with no duplicates."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
import redis
import requests

from devstack.stack import LocalStack, StackOptions
from tests.support.sse import SseEvent, parse_sse


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("devstack-crash"),
        workers=2,
        pull_seconds=3.0,
        config_overrides={"operations": {"leaseSeconds": 2, "scanSeconds": 0.5}},
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()


def _wait(predicate: object, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()  # type: ignore[operator]
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_sigkill_mid_spawn_ends_with_one_running_lab(stack: LocalStack) -> None:
    state = stack.state()
    user = {"Authorization": f"Bearer {state['tokens']['rachel']['token']}"}
    admin = {"Authorization": f"Bearer {state['tokens']['admin']['token']}"}
    base = f"{stack.spawner_url}/spawner/v1"
    image = stack.demo_image
    store = redis.Redis.from_url(stack.redis_url, decode_responses=True)

    response = requests.post(
        f"{base}/labs/rachel/spawn",
        json={"options": {"image": image, "size": "small"}, "env": {}},
        headers=user,
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 303
    namespace = "nublado-rachel"
    # Wait until the pod exists and its image is being pulled, then kill the worker
    # holding the spawn's lease.
    _wait(lambda: stack.kube.store.get("pods", namespace, "nb-rachel-lab"))
    holder = str(_wait(lambda: store.get("spawner:lease:lab:rachel")))
    pid = int(holder.split(":")[1])
    os.kill(pid, signal.SIGKILL)

    with requests.get(f"{base}/labs/rachel/events", headers=user, stream=True, timeout=60) as r:
        events = [e for e in parse_sse(r.iter_content(None)) if isinstance(e, SseEvent)]
    assert events[-1].type == "complete"
    # The killed worker's run and the resumed run each announced the start.
    starts = [e for e in events if e.type == "info" and e.data.startswith("Starting a lab")]
    assert len(starts) == 2
    status = requests.get(f"{base}/labs/rachel", headers=admin, timeout=5).json()
    assert status["status"] == "running"
    assert status["pod"] == "present"

    pods = stack.kube.store.list("pods", namespace)
    assert [p["metadata"]["name"] for p in pods] == ["nb-rachel-lab"]
    configmaps = sorted(
        c["metadata"]["name"]
        for c in stack.kube.store.list("configmaps", namespace)
        if c["metadata"]["name"].startswith("nb-")
    )
    assert configmaps == ["nb-rachel-env", "nb-rachel-nss"]
    _wait(lambda: store.get("spawner:lease:lab:rachel") is None)
    # The killed worker was replaced by gunicorn.
    assert stack.spawner_process is not None and stack.spawner_process.poll() is None

    assert requests.delete(f"{base}/labs/rachel", headers=admin, timeout=5).status_code == 202
    with requests.get(f"{base}/labs/rachel/events", headers=user, stream=True, timeout=60) as r:
        events = [e for e in parse_sse(r.iter_content(None)) if isinstance(e, SseEvent)]
    assert events[-1].type == "complete"
    assert stack.kube.store.get("namespaces", None, namespace) is None

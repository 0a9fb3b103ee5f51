"""SIGTERM ends open event streams at once instead of holding gunicorn for its timeout, and
has the runner hand its work over before it exits."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
import redis
import requests

from devstack.stack import LocalStack, StackOptions
from tests.labs.conftest import wait_for
from tests.support.sse import SseEvent, parse_sse


def _spawn_wile(stack: LocalStack) -> dict[str, str]:
    """wile's spawn POSTed; the headers that authenticate him."""
    user = {"Authorization": f"Bearer {stack.state()['tokens']['wile']['token']}"}
    response = requests.post(
        f"{stack.spawner_url}/spawner/v1/labs/wile/spawn",
        json={"options": {"image": stack.demo_image, "size": "small"}, "env": {}},
        headers=user,
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 303
    return user


def test_sigterm_closes_streams_and_gunicorn_exits_promptly(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    options = StackOptions(
        state_dir=Path(tmp_path_factory.mktemp("devstack-shutdown")), workers=1, pull_seconds=60
    )
    stack = LocalStack(options).start()
    try:
        user = _spawn_wile(stack)
        base = f"{stack.spawner_url}/spawner/v1"
        received: list[SseEvent] = []
        opened = threading.Event()
        ended = threading.Event()

        def follow() -> None:
            with requests.get(
                f"{base}/labs/wile/events", headers=user, stream=True, timeout=60
            ) as r:
                opened.set()
                for item in parse_sse(r.iter_content(None)):
                    if isinstance(item, SseEvent):
                        received.append(item)
            ended.set()

        threading.Thread(target=follow, daemon=True).start()
        assert opened.wait(10)
        # The pull takes a minute, so the stream stays open until the worker closes it.
        assert stack.spawner_process is not None
        started = time.monotonic()
        stack.spawner_process.terminate()
        assert ended.wait(10)
        code = stack.spawner_process.wait(timeout=20)
        elapsed = time.monotonic() - started
        assert code == 0
        # Well inside the 30 s graceful timeout that open streams would otherwise use.
        assert elapsed < 10
        assert received and received[-1].type not in ("complete", "failed")
    finally:
        stack.stop()


def test_sigterm_has_the_runner_hand_its_spawn_over_and_exit(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The runner is one process: on SIGTERM it lets go of the operation it runs at once
    (rather than when the lease would expire) and exits 0; started again, as the kubelet
    would, its successor resumes the spawn."""
    options = StackOptions(
        state_dir=Path(tmp_path_factory.mktemp("devstack-runner-term")),
        workers=1,
        pull_seconds=60,
        # A lease far longer than the test: only a release lets the successor in.
        config_overrides={"operations": {"leaseSeconds": 120, "scanSeconds": 0.5}},
    )
    stack = LocalStack(options).start()
    try:
        _spawn_wile(stack)
        store = redis.Redis.from_url(stack.redis_url, decode_responses=True)
        lease = "spawner:lease:lab:wile"
        holder = str(wait_for(lambda: store.get(lease), timeout=30))
        runner = stack.replicas[0].runner
        assert runner is not None
        first = runner.process
        # No gunicorn master: the lease is held by the process the stack started.
        assert int(holder.split(":")[1]) == first.pid
        assert stack.replicas[0].runner_pids() == [first.pid]

        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=30) == 0

        def resumed() -> int | None:
            value = store.get(lease)
            pid = int(str(value).split(":")[1]) if value else None
            return pid if pid is not None and pid != first.pid else None

        successor = wait_for(resumed, timeout=30)
        assert successor == runner.pid != first.pid
        assert runner.restarts == 1
        assert stack.replicas[0].runner_pids() == [successor]
    finally:
        stack.stop()

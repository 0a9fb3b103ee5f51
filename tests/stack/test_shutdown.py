"""SIGTERM ends open event streams at once instead of holding gunicorn for its timeout."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import requests

from devstack.stack import LocalStack, StackOptions
from tests.support.sse import SseEvent, parse_sse


def test_sigterm_closes_streams_and_gunicorn_exits_promptly(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    options = StackOptions(
        state_dir=Path(tmp_path_factory.mktemp("devstack-shutdown")), workers=1, pull_seconds=60
    )
    stack = LocalStack(options).start()
    try:
        state = stack.state()
        user = {"Authorization": f"Bearer {state['tokens']['wile']['token']}"}
        base = f"{stack.spawner_url}/spawner/v1"
        image = stack.demo_image
        response = requests.post(
            f"{base}/labs/wile/spawn",
            json={"options": {"image": image, "size": "small"}, "env": {}},
            headers=user,
            allow_redirects=False,
            timeout=10,
        )
        assert response.status_code == 303
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

"""One spawn followed by its request id on the real stack: gunicorn with two gevent
workers writing JSON lines, from the POST's access line to the lines of the worker that ran
the operation and the operation's events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import requests

from devstack.stack import LocalStack, StackOptions
from tests.labs.conftest import wait_for
from tests.support.sse import SseEvent, parse_sse

REQUEST_ID = "follow-me-3f9a1c0b7d2e4a5f"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    state_dir = tmp_path_factory.mktemp("devstack")
    options = StackOptions(
        state_dir=state_dir,
        workers=2,
        pull_seconds=0.2,
        log_path=state_dir / "gunicorn.log",
        config_overrides={"logFormat": "json"},
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()


def _log(stack: LocalStack) -> str:
    assert stack.options.log_path is not None
    return stack.options.log_path.read_text(encoding="utf-8")


def _entries(stack: LocalStack) -> list[dict[str, Any]]:
    """Every line of gunicorn's output, each of which must be one JSON object."""
    return [json.loads(line) for line in _log(stack).splitlines() if line.strip()]


def _follow(base: str, user: str, headers: dict[str, str]) -> tuple[str, list[SseEvent]]:
    with requests.get(f"{base}/labs/{user}/events", headers=headers, stream=True, timeout=30) as r:
        events = [e for e in parse_sse(r.iter_content(None)) if isinstance(e, SseEvent)]
        return r.headers["X-Request-Id"], events


def _stream_requests(stack: LocalStack, user: str) -> list[str]:
    client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    try:
        entries = client.xrange(f"spawner:events:lab:{user}")
    finally:
        client.close()
    return [fields.get("request", "") for _, fields in entries]


def test_one_spawn_is_followed_by_its_request_id(stack: LocalStack) -> None:
    state = stack.state()
    tokens = [entry["token"] for entry in state["tokens"].values()]
    user = {"Authorization": f"Bearer {state['tokens']['wile']['token']}"}
    admin = {"Authorization": f"Bearer {state['tokens']['admin']['token']}"}
    base = f"{stack.spawner_url}/spawner/v1"

    response = requests.post(
        f"{base}/labs/wile/spawn",
        json={"options": {"image": stack.demo_image, "size": "small"}, "env": {}},
        headers={**user, "X-Request-Id": REQUEST_ID},
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 303, response.text
    assert response.headers["X-Request-Id"] == REQUEST_ID

    # The event stream's own request, sent without an id, gets a fresh one.
    stream_id, events = _follow(base, "wile", user)
    assert events[-1].type == "complete"
    assert len(stream_id) == 32 and stream_id != REQUEST_ID
    # Every event of the spawn carries the POST's id; the stream's format is unchanged.
    assert _stream_requests(stack, "wile") == [REQUEST_ID] * len(events)

    def operation_lines() -> list[dict[str, Any]]:
        return [
            e
            for e in _entries(stack)
            if e.get("request_id") == REQUEST_ID and e["logger"] != "access"
        ]

    done = wait_for(lambda: [e for e in operation_lines() if e["message"].endswith(" done")])
    [line] = done
    assert line["message"] == "spawn of lab:wile done"
    assert line["workload"] == "lab:wile"
    assert len(line["operation"]) == 32
    assert all(e["operation"] == line["operation"] for e in operation_lines())

    posts = [
        e for e in _entries(stack) if e["logger"] == "access" and e.get("request_id") == REQUEST_ID
    ]
    [post] = posts
    assert post["method"] == "POST"
    assert post["path"] == "/spawner/v1/labs/wile/spawn"
    assert post["route"] == "/spawner/v1/labs/<username>/spawn"
    assert post["status"] == 303
    assert post["user"] == "wile"
    assert isinstance(post["duration_ms"], int) and isinstance(post["size"], int)
    stream_line = wait_for(
        lambda: [e for e in _entries(stack) if e.get("request_id") == stream_id]
    )[0]
    assert stream_line["path"] == "/spawner/v1/labs/wile/events"

    # A delete sent without an id: its own fresh id follows it the same way.
    deleted = requests.delete(f"{base}/labs/wile", headers=admin, timeout=5)
    assert deleted.status_code == 202
    delete_id = deleted.headers["X-Request-Id"]
    assert len(delete_id) == 32 and delete_id not in (REQUEST_ID, stream_id)
    _, events = _follow(base, "wile", user)
    assert events[-1].type == "complete"
    assert set(_stream_requests(stack, "wile")) == {delete_id}
    wait_for(lambda: any(e.get("message") == "delete of lab:wile done" for e in _entries(stack)))
    [delete_done] = [e for e in _entries(stack) if e.get("message") == "delete of lab:wile done"]
    assert delete_done["request_id"] == delete_id

    text = _log(stack)
    assert all(token not in text for token in tokens)


def test_a_token_sent_as_the_request_id_is_never_echoed(stack: LocalStack) -> None:
    token = stack.state()["tokens"]["rachel"]["token"]
    response = requests.get(
        f"{stack.spawner_url}/spawner/v1/labs/rachel",
        headers={"Authorization": f"Bearer {token}", "X-Request-Id": token},
        timeout=5,
    )
    answered = response.headers["X-Request-Id"]
    assert answered != token and len(answered) == 32
    line = wait_for(lambda: [e for e in _entries(stack) if e.get("request_id") == answered])[0]
    assert line["user"] == "rachel"
    assert token not in _log(stack)


def test_every_line_is_json_with_a_level_and_a_time(stack: LocalStack) -> None:
    entries = _entries(stack)
    assert entries
    assert all({"time", "level", "logger", "message"} <= set(e) for e in entries)
    # gunicorn's own lines too (the arbiter starting, the workers booting).
    assert any(e["logger"].startswith("gunicorn") for e in entries)

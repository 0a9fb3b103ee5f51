"""The administrators' live feed: who may follow it, and what a lab's life looks like there."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from typing import Any

import redis
from flask import Flask
from flask.testing import FlaskClient

from app.extensions.labs import machinery_of
from app.storage.admin_feed import AdminFeed
from tests.labs.conftest import LabUser, read_events, spawn_body, wait_for

FEED = "/spawner/v1/admin/stream"


def _messages(chunks: Iterator[bytes]) -> Iterator[tuple[str, Any]]:
    """(type, data) of each event the feed sends, in flask-sse's format."""
    for chunk in chunks:
        fields = dict(
            line.split(":", 1) for line in chunk.decode().strip().split("\n") if ":" in line
        )
        if "event" in fields:
            yield fields["event"], json.loads(fields["data"])


def test_only_administrators_follow_the_feed(
    lab_client: FlaskClient, new_user: Any, tokens: dict[str, str]
) -> None:
    user: LabUser = new_user()
    assert lab_client.get(FEED).status_code == 401
    refused = lab_client.get(FEED, headers=user.headers)
    assert refused.status_code == 403
    assert refused.get_json()["code"] == "permission_denied"


def test_the_feed_shows_a_lab_from_spawn_to_deletion(
    lab_app: Flask,
    lab_client: FlaskClient,
    new_user: Any,
    admin_headers: dict[str, str],
    redis_client: redis.Redis,
) -> None:
    user: LabUser = new_user()
    gone = {"kind": "lab", "name": user.username, "status": "deleted"}
    opening: list[bytes] = []
    headers: dict[str, str] = {}
    seen: queue.Queue[tuple[str, Any]] = queue.Queue()

    def follow() -> None:
        # The body streams in the request's context: one thread asks and reads, as a
        # server's worker does.
        response = lab_client.get(FEED, headers=admin_headers, buffered=False)
        headers.update(
            status=str(response.status_code),
            mimetype=response.mimetype or "",
            cache=response.headers.get("Cache-Control", ""),
        )
        chunks = iter(response.response)
        opening.append(next(chunks))
        try:
            for kind, data in _messages(chunks):
                seen.put((kind, data))
                if kind == "workload" and data == gone:
                    return
        finally:
            response.close()

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    channel = machinery_of(lab_app).engine.store.feed_channel
    # The reader's subscription is made when it asks for the first event.
    wait_for(lambda: dict(redis_client.pubsub_numsub(channel))[channel] == 1)

    spawned = lab_client.post(
        f"/spawner/v1/labs/{user.username}/spawn", json=spawn_body(), headers=user.headers
    )
    assert spawned.status_code == 303
    assert read_events(lab_client, user.username, user.headers)[-1].type == "complete"
    # News from elsewhere in the service reaches the same followers.
    prefix = machinery_of(lab_app).context.config.redis.key_prefix
    AdminFeed(redis_client, prefix).publish("prepull", {"started": 1})
    deleted = lab_client.delete(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
    assert deleted.status_code == 202
    assert read_events(lab_client, user.username, user.headers)[-1].type == "complete"
    reader.join(timeout=20)
    assert not reader.is_alive(), "the feed never said the lab was deleted"

    assert headers == {"status": "200", "mimetype": "text/event-stream", "cache": "no-cache"}
    assert opening == [b": live feed\n\n"]
    news = [seen.get_nowait() for _ in range(seen.qsize())]
    mine = [data["status"] for kind, data in news if data.get("name") == user.username]
    assert mine == ["starting", "running", "terminating", "deleted"]
    assert ("prepull", {"started": 1}) in news
    # Closing the response ended the subscription.
    wait_for(lambda: dict(redis_client.pubsub_numsub(channel))[channel] == 0)

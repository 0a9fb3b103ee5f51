"""One pub/sub subscription per process wakes every local event stream."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from app.storage.event_hub import EventHub
from app.storage.events import Event, EventStore, EventType
from tests.support.redis_server import RedisServer


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.close()


@pytest.fixture
def events(private_redis: RedisServer) -> EventStore:
    return EventStore(redis.Redis.from_url(private_redis.url, decode_responses=True), "t:")


@pytest.fixture
def hub(private_redis: RedisServer, events: EventStore) -> Iterator[EventHub]:
    client = redis.Redis.from_url(private_redis.url, decode_responses=True)
    hub = EventHub(client, events)
    hub.start()
    yield hub
    hub.stop()


def _follow_in_thread(hub: EventHub, username: str, idle: float) -> queue.Queue[Event | None]:
    received: queue.Queue[Event | None] = queue.Queue()

    def run() -> None:
        for batch in hub.follow(username, "0-0", idle):
            for item in batch or [None]:
                received.put(item)

    threading.Thread(target=run, daemon=True).start()
    return received


def _next_event(received: queue.Queue[Event | None]) -> Event:
    while True:
        item = received.get(timeout=5)
        if item is not None:
            return item


def test_streams_get_new_events_without_polling(hub: EventHub, events: EventStore) -> None:
    events.append("ann", EventType.INFO, "first")
    # An idle period far longer than the test: only a wake-up can deliver in time.
    followers = [_follow_in_thread(hub, "ann", idle=60) for _ in range(3)]
    for received in followers:
        assert _next_event(received).data == "first"
    events.append("bob", EventType.INFO, "not for ann")
    events.append("ann", EventType.PROGRESS, "50")
    events.append("ann", EventType.COMPLETE, "")
    for received in followers:
        assert [_next_event(received).type for _ in range(2)] == [
            EventType.PROGRESS,
            EventType.COMPLETE,
        ]


def test_streams_survive_a_redis_restart(
    hub: EventHub, events: EventStore, private_redis: RedisServer
) -> None:
    events.append("ann", EventType.INFO, "before")
    # No polling: only the re-subscribed hub can deliver the later event.
    received = _follow_in_thread(hub, "ann", idle=60)
    assert _next_event(received).data == "before"
    private_redis.stop()
    private_redis.start()
    # Redis kept nothing; the stream starts again from the new entries.
    events.append("ann", EventType.INFO, "after")
    assert _next_event(received).data == "after"


def test_idle_streams_yield_keepalive_markers(hub: EventHub, events: EventStore) -> None:
    events.append("ann", EventType.INFO, "only")
    stream = hub.follow("ann", "0-0", 0.05)
    assert [event.data for event in next(stream) or []] == ["only"]
    assert next(stream) is None
    assert hub.streams == 1
    stream.close()
    assert hub.streams == 0


def test_close_streams_ends_open_streams_without_a_terminal_event(
    hub: EventHub, events: EventStore
) -> None:
    events.append("ann", EventType.INFO, "started")
    received = _follow_in_thread(hub, "ann", idle=60)
    assert _next_event(received).data == "started"
    assert hub.streams == 1
    hub.close_streams()
    deadline = time.monotonic() + 5
    while hub.streams and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hub.streams == 0
    assert received.empty()


def test_an_idle_subscription_is_pinged_and_kept(
    private_redis: RedisServer, events: EventStore
) -> None:
    client = redis.Redis.from_url(private_redis.url, decode_responses=True)
    hub = EventHub(client, events, health_seconds=0.05, retry_seconds=0.01)
    hub.start()
    try:
        deadline = time.monotonic() + 5
        while hub.subscriptions == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        # Several health periods pass in silence: each PING is answered, so the hub keeps
        # its connection rather than reconnecting.
        time.sleep(0.5)
        assert hub.subscriptions == 1
        events.append("ann", EventType.INFO, "still here")
        received = _follow_in_thread(hub, "ann", idle=60)
        assert _next_event(received).data == "still here"
        events.append("ann", EventType.COMPLETE, "")
        assert _next_event(received).type == EventType.COMPLETE
    finally:
        hub.stop()


def test_a_replay_comes_as_one_batch_ending_at_the_terminal_event(
    hub: EventHub, events: EventStore
) -> None:
    events.append("ann", EventType.INFO, "a")
    events.append("ann", EventType.PROGRESS, "100")
    events.append("ann", EventType.COMPLETE, "")
    stream = hub.follow("ann", "0-0", 60)
    # One batch is one write to the client; the stream ends after the terminal event.
    assert [event.data for event in next(stream) or []] == ["a", "100", ""]
    assert next(stream, "ended") == "ended"


def test_a_stream_closed_before_it_is_read_lets_go_of_its_registration(
    hub: EventHub, events: EventStore
) -> None:
    events.append("ann", EventType.INFO, "a")
    following = hub.follow("ann", "0-0", 60)
    assert following.replayed
    assert hub.streams == 1
    following.close()
    assert hub.streams == 0
    # A user with no stream: nothing replayed, so the caller has to ask whether it exists.
    nobody = hub.follow("nobody", "0-0", 60)
    assert not nobody.replayed
    nobody.close()
    assert hub.streams == 0

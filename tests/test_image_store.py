"""Image lists in Redis: kept parsed per process, trusted without a round trip while the
process hears of every write."""

from __future__ import annotations

import time

import redis

from app.models.images import ImageSet
from app.storage.event_hub import EventHub
from app.storage.events import EventStore
from app.storage.images import ImageStore

PREFIX = "t:"


def _gets(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_get", {}).get("calls", 0))


def _wait_for(reader: ImageStore, config: str) -> None:
    deadline = time.monotonic() + 5
    while config not in reader.load():
        assert time.monotonic() < deadline, f"{config} never showed"
        time.sleep(0.01)


def _settle(reader: ImageStore, client: redis.Redis) -> None:
    """Until a load needs no round trip (a write's notice may still be on its way)."""
    deadline = time.monotonic() + 5
    while True:
        before = _gets(client)
        reader.load()
        if _gets(client) == before:
            return
        assert time.monotonic() < deadline, "loads kept asking Redis"
        time.sleep(0.01)


def test_without_a_subscription_every_load_checks_the_version(redis_client: redis.Redis) -> None:
    client = redis_client
    writer, reader = ImageStore(client, PREFIX), ImageStore(client, PREFIX)
    writer.save(ImageSet(config="a"))
    assert list(reader.load()) == ["a"]
    before = _gets(client)
    assert list(reader.load()) == ["a"]
    assert _gets(client) == before + 1
    writer.save(ImageSet(config="b"))
    assert sorted(reader.load()) == ["a", "b"]


def test_while_subscribed_loads_need_no_round_trip_until_a_write(redis_client: redis.Redis) -> None:
    client = redis_client
    writer, reader = ImageStore(client, PREFIX), ImageStore(client, PREFIX)
    hub = EventHub(client, EventStore(client, PREFIX))
    hub.add_listener(reader)
    hub.start()
    try:
        deadline = time.monotonic() + 5
        while hub.subscriptions == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        writer.save(ImageSet(config="a"))
        _wait_for(reader, "a")
        # Loaded while subscribed, with no notice since: trusted from then on.
        _settle(reader, client)
        before = _gets(client)
        for _ in range(5):
            assert list(reader.load()) == ["a"]
        assert _gets(client) == before
        # Another process's write is announced, and the next load reads it.
        writer.forget(["a"])
        writer.save(ImageSet(config="b"))
        _wait_for(reader, "b")
        assert list(reader.load()) == ["b"]
    finally:
        hub.stop()
    # Without the subscription the store asks Redis again.
    before = _gets(client)
    reader.load()
    assert _gets(client) == before + 1

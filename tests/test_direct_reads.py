"""The status and list reads' connections of their own: the same answers as the client's,
a failed connection dropped, the service's metrics counting them, and Sentinel left to its
pool."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from prometheus_client import REGISTRY
from redis.sentinel import Sentinel, SentinelConnectionPool

from app import metrics
from app.extensions.redis import build_redis
from app.models.config import RedisConfig
from app.models.workload import WorkloadRef
from app.storage.direct_reads import DirectReads
from app.storage.workloads import StoredNames, StoredRecord, WorkloadStore
from tests.support.redis_server import RedisServer

PREFIX = "direct:"
REF = WorkloadRef("lab", "rachel")


@pytest.fixture
def server() -> Iterator[RedisServer]:
    """A server of its own, which a test may stop and start again on the same port."""
    made = RedisServer()
    made.start()
    yield made
    made.close()


def _service_client(url: str) -> redis.Redis:
    return build_redis(
        RedisConfig(
            url=url,
            sentinel=None,
            key_prefix=PREFIX,
            socket_timeout=3.0,
            socket_connect_timeout=1.0,
            max_connections=4,
            password=None,
        )
    )


def _round_trips() -> float:
    metrics.flush_hot_counters()
    return REGISTRY.get_sample_value("lab_spawner_redis_round_trips_total") or 0.0


def test_the_status_read_answers_as_the_client_does(server: RedisServer) -> None:
    client = _service_client(server.url)
    store = WorkloadStore(client, PREFIX)
    assert store.stored_record(REF) == StoredRecord(None, False)
    client.set(store.record_key(REF), '{"username": "rachel"}')
    client.set(store.complete_key, "1")
    rounds_before = _round_trips()
    assert store.stored_record(REF) == StoredRecord('{"username": "rachel"}', True)
    # The service's counted connections: the round trip is in the metrics.
    assert _round_trips() == rounds_before + 1


def test_the_list_read_answers_as_the_client_does_in_one_round_trip(
    server: RedisServer,
) -> None:
    client = _service_client(server.url)
    store = WorkloadStore(client, PREFIX)
    assert store.stored_names("lab") == StoredNames([], False)
    client.sadd(store.index_key("lab"), "wendy", "rachel")
    client.set(store.complete_key, "1")
    rounds_before = _round_trips()
    assert store.stored_names("lab") == StoredNames(["rachel", "wendy"], True)
    assert _round_trips() == rounds_before + 1


def test_an_error_reply_leaves_no_reply_behind_for_the_next_read(server: RedisServer) -> None:
    """A command refused before the last one leaves the later replies unread: the
    connection is dropped, so the next read gets its own answer, not a stale one."""
    client = _service_client(server.url)
    reads = DirectReads.of(client)
    assert reads is not None
    client.set("direct:text", "value")
    client.sadd("direct:set", "member")
    with pytest.raises(redis.ResponseError):
        reads.replies(("SMEMBERS", "direct:text"), ("EXISTS", "direct:text"))
    assert reads.replies(("SMEMBERS", "direct:set")) == [["member"]]
    with pytest.raises(redis.ResponseError):
        reads.replies(("EXISTS", "direct:text"), ("SMEMBERS", "direct:text"))
    assert reads.mget("direct:text") == ["value"]


def test_a_failed_connection_is_dropped_and_the_next_read_reconnects(
    server: RedisServer,
) -> None:
    client = _service_client(server.url)
    reads = DirectReads.of(client)
    assert reads is not None
    client.set("direct:key", "value")
    assert reads.mget("direct:key", "direct:none") == ["value", None]
    server.stop()
    with pytest.raises(redis.ConnectionError):
        reads.mget("direct:key")
    server.start()
    client.set("direct:key", "again")
    assert reads.mget("direct:key") == ["again"]


def test_sentinel_reads_go_through_the_pool() -> None:
    """A pool that follows failovers is not bypassed."""
    pool = SentinelConnectionPool("primary", Sentinel([]))
    assert DirectReads.of(redis.Redis(connection_pool=pool)) is None

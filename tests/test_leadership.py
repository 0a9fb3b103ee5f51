"""Elected loops: who leads is in the lease, a leader cut off from Redis steps down before
its lease can move, and a deposed leader's writes are refused (fencing)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis

from app.engine.leadership import ElectedWorker, Tenure
from app.models.leadership import ReplicaIdentity
from app.models.workload import WorkloadRef
from app.storage.leader import LeadershipLease, LeadershipLost, read_leaderships
from app.storage.workloads import IdleWrite, WorkloadStore
from tests.labs.conftest import wait_for
from tests.support.partition import PartitionProxy
from tests.support.redis_server import RedisServer

KEY = "spawner:leader:test-loop"
REPLICA = ReplicaIdentity(name="spawner-2", url="http://127.0.0.1:9999", pid=4242)


def lease(client: redis.Redis, owner: str, ttl: float = 5.0) -> LeadershipLease:
    return LeadershipLease(
        client, key=KEY, loop="test-loop", owner=owner, ttl_seconds=ttl, replica=REPLICA
    )


def test_the_lease_says_who_leads_and_each_election_has_a_new_token(
    redis_client: redis.Redis,
) -> None:
    first, second = lease(redis_client, "a"), lease(redis_client, "b")
    assert read_leaderships(redis_client, [("test-loop", KEY)]) == [None]

    assert first.acquire()
    assert not second.acquire()
    assert first.acquire()  # re-entrant: the same tenure, the same token
    [held] = read_leaderships(redis_client, [("test-loop", KEY)])
    assert held is not None
    assert (held.loop, held.owner, held.replica) == ("test-loop", "a", REPLICA)
    assert 4.0 < held.expires_in <= 5.0
    assert first.fence is not None and first.fence.key == KEY

    assert first.release()
    assert second.acquire()
    [moved] = read_leaderships(redis_client, [("test-loop", KEY)])
    assert moved is not None
    assert (moved.owner, moved.token) == ("b", held.token + 1)
    assert not first.renew()  # a released lease is not renewed


def test_a_deposed_leaders_writes_are_refused(redis_client: redis.Redis) -> None:
    store = WorkloadStore(redis_client, "spawner:")
    ref = WorkloadRef("lab", "rachel")
    old, new = lease(redis_client, "a", ttl=0.2), lease(redis_client, "b")
    assert old.acquire()
    old_fence = old.fence
    assert old_fence is not None
    assert store.put_if_idle(ref=ref, record='{"v": 1}', expect=None, fence=old_fence)

    # The old leader stalls past its lease; another is elected.
    wait_for(new.acquire, timeout=5)
    with pytest.raises(LeadershipLost):
        store.put_if_idle(ref=ref, record='{"v": 0}', expect='{"v": 1}', fence=old_fence)
    with pytest.raises(LeadershipLost):
        store.put_many_if_idle(writes=[IdleWrite(ref, '{"v": 0}', '{"v": 1}')], fence=old_fence)
    store.begin_rebuild("r1", 60)
    with pytest.raises(LeadershipLost):
        store.mark_complete(rebuild_id="r1", finished="now", fence=old_fence)
    assert store.record(ref) == '{"v": 1}'
    assert not store.is_complete()

    assert store.put_if_idle(ref=ref, record='{"v": 2}', expect='{"v": 1}', fence=new.fence)
    assert store.mark_complete(rebuild_id="r1", finished="now", fence=new.fence)
    assert store.record(ref) == '{"v": 2}'


@pytest.fixture
def partition(redis_server: RedisServer) -> Iterator[PartitionProxy]:
    proxy = PartitionProxy(("127.0.0.1", redis_server.port))
    yield proxy
    proxy.close()


def test_a_leader_cut_off_from_redis_steps_down_before_its_lease_can_move(
    partition: PartitionProxy, redis_client: redis.Redis
) -> None:
    # The leader's client waits far longer for an answer than its lease lasts, so only its
    # own clock can tell it that its lease may be gone.
    cut_off = redis.Redis(port=partition.port, socket_timeout=10, decode_responses=True)
    stepped_down: list[float] = []
    tenures: list[Tenure] = []

    def lead(tenure: Tenure) -> None:
        tenures.append(tenure)
        tenure.wait(60)
        stepped_down.append(time.monotonic())

    leader = ElectedWorker(lease(cut_off, "a", ttl=1.5), lead, name="test-loop")
    leader.start()
    try:
        wait_for(lambda: leader.is_leader, timeout=5)
        partition.partition()
        successor = lease(redis_client, "b", ttl=1.5)
        wait_for(successor.acquire, timeout=10, interval=0.01)
        elected = time.monotonic()
        assert stepped_down, "the old leader still acted when another was elected"
        assert stepped_down[0] < elected
        assert tenures[0].ended

        # Healed, whatever the deposed leader still writes is refused.
        partition.heal()
        store = WorkloadStore(cut_off, "spawner:")
        ref = WorkloadRef("lab", "wile")
        with pytest.raises(LeadershipLost):
            store.put_if_idle(ref=ref, record="{}", expect=None, fence=tenures[0].fence)
        assert store.record(ref) is None
    finally:
        partition.heal()
        stopping = threading.Thread(target=leader.stop)
        stopping.start()
        stopping.join(15)
        cut_off.close()

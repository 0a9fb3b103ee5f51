"""Starting a spawn in Redis: one script checks, records, queues and may take the lease."""

from __future__ import annotations

import json
import time

import redis

from app.models.lab import LabRecord, LabStatus, Operation, OperationKind, PodState
from app.storage.events import EventStore, EventType
from app.storage.labs import LabStore, LeaseClaim, StartResult

PREFIX = "t:"


def _record(username: str, status: LabStatus = LabStatus.STARTING) -> LabRecord:
    return LabRecord(
        username=username,
        status=status,
        pod=PodState.MISSING,
        options={"image": "registry.test/lab:1", "size": "small", "debug": False},
        env={},
        uid=1000,
        gid=1000,
        groups=[{"name": username, "id": 1000}],
        quotas={},
    )


def _operation(username: str) -> Operation:
    now = time.time()
    return Operation(
        id=f"op-{time.time_ns()}",
        kind=OperationKind.SPAWN,
        username=username,
        started=now,
        deadline=now + 60,
        spec={},
    )


def _start(
    labs: LabStore, events: EventStore, username: str, claim: LeaseClaim | None
) -> tuple[Operation, StartResult, bool]:
    operation = _operation(username)
    first = events.announcement(username, [(EventType.INFO, "Lab creation requested")])
    outcome = labs.start_spawn(_record(username), operation, first, "token-value", claim)
    return operation, outcome.result, outcome.leased


def test_a_spawn_is_queued_with_its_lease_in_one_step(redis_client: redis.Redis) -> None:
    labs, events = LabStore(redis_client, PREFIX), EventStore(redis_client, PREFIX)
    events.append("ada", EventType.INFO, "an older operation's event")
    operation, result, leased = _start(labs, events, "ada", LeaseClaim("worker-1", 5000))
    assert (result, leased) == (StartResult.STARTED, True)
    assert labs.lease_holder("ada") == "worker-1"
    assert 0 < redis_client.pttl(f"{PREFIX}lease:ada") <= 5000
    current, token = labs.operation_and_token("ada")
    assert current is not None and current.id == operation.id
    assert token == "token-value"
    assert labs.usernames() == ["ada"]
    assert labs.pending_operations() == ["ada"]
    record = labs.get("ada")
    assert record is not None and record.status == LabStatus.STARTING
    assert labs.get_unless_busy("ada") == (record, True)
    assert labs.get_unless_busy("nobody") == (None, False)
    # The stream starts again: the older operation's event is gone.
    assert [e.data for e in events.read("ada")] == ["Lab creation requested"]


def test_a_lab_that_is_not_failed_is_a_conflict_and_nothing_changes(
    redis_client: redis.Redis,
) -> None:
    labs, events = LabStore(redis_client, PREFIX), EventStore(redis_client, PREFIX)
    first, _, _ = _start(labs, events, "bo", None)
    before = {key: redis_client.dump(key) for key in redis_client.keys(f"{PREFIX}*")}
    outcome = labs.start_spawn(
        _record("bo"),
        _operation("bo"),
        events.announcement("bo", [(EventType.INFO, "again")]),
        "other-token",
        LeaseClaim("worker-2", 5000),
    )
    assert outcome.result is StartResult.CONFLICT and not outcome.leased
    assert outcome.current is not None and outcome.current.status == LabStatus.STARTING
    after = {key: redis_client.dump(key) for key in redis_client.keys(f"{PREFIX}*")}
    assert after == before
    current = labs.operation("bo")
    assert current is not None and current.id == first.id
    assert labs.lease_holder("bo") is None


def test_a_failed_lab_is_replaced_and_a_held_lease_is_left_alone(
    redis_client: redis.Redis,
) -> None:
    labs, events = LabStore(redis_client, PREFIX), EventStore(redis_client, PREFIX)
    failed = _record("cy", LabStatus.FAILED)
    redis_client.set(f"{PREFIX}lab:cy", json.dumps(failed.to_json()))
    redis_client.set(f"{PREFIX}lease:cy", "worker-old", px=5000)
    _, result, leased = _start(labs, events, "cy", LeaseClaim("worker-new", 5000))
    assert (result, leased) == (StartResult.STARTED, False)
    assert labs.lease_holder("cy") == "worker-old"
    record = labs.get("cy")
    assert record is not None and record.status == LabStatus.STARTING


def test_events_for_the_lease_holder_are_added_only_with_the_lease(
    redis_client: redis.Redis,
) -> None:
    labs, events = LabStore(redis_client, PREFIX), EventStore(redis_client, PREFIX)
    starting = events.announcement("di", [(EventType.INFO, "Starting"), (EventType.PROGRESS, "2")])
    first = events.announcement("di", [(EventType.INFO, "Lab creation requested")])
    outcome = labs.start_spawn(
        _record("di"), _operation("di"), first, "t", LeaseClaim("w", 5000), if_leased=starting
    )
    assert (outcome.leased, outcome.provisioned) == (True, False)
    assert [e.data for e in events.read("di")] == ["Lab creation requested", "Starting", "2"]

    # A lease held elsewhere: the worker holding it will announce the start itself.
    redis_client.set(f"{PREFIX}lab:di", json.dumps(_record("di", LabStatus.FAILED).to_json()))
    redis_client.delete(f"{PREFIX}op:di")
    outcome = labs.start_spawn(
        _record("di"), _operation("di"), first, "t", LeaseClaim("v", 5000), if_leased=starting
    )
    assert (outcome.leased, outcome.provisioned) == (False, False)
    assert [e.data for e in events.read("di")] == ["Lab creation requested"]


def test_the_lease_holder_learns_whether_the_user_was_provisioned(
    redis_client: redis.Redis,
) -> None:
    labs, events = LabStore(redis_client, PREFIX), EventStore(redis_client, PREFIX)
    labs.mark_provisioned("ed")
    first = events.announcement("ed", [(EventType.INFO, "Lab creation requested")])
    outcome = labs.start_spawn(_record("ed"), _operation("ed"), first, "t", LeaseClaim("w", 5000))
    assert (outcome.result, outcome.leased, outcome.provisioned) == (
        StartResult.STARTED,
        True,
        True,
    )

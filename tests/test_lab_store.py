"""The workload store's contracts: queueing a spawn or a delete, finishing, and repairs."""

from __future__ import annotations

import json
import time

import redis

from app.engine.reads import WorkloadReads
from app.models.lab import LabRecord, PodState
from app.models.workload import Action, Operation, WorkloadRef, WorkloadStatus
from app.storage.events import EventStore, EventType
from app.storage.workloads import (
    DeleteQueued,
    StoredNames,
    StoredRecord,
    WorkloadStore,
)
from app.workloads.lab.store import LabStore, lab_ref, record_json

PREFIX = "t:"


def _record(username: str, status: WorkloadStatus = WorkloadStatus.STARTING) -> LabRecord:
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


def _operation(ref: WorkloadRef, action: Action = Action.SPAWN) -> Operation:
    now = time.time()
    return Operation(
        id=f"op-{time.time_ns()}",
        ref=ref,
        action=action,
        started=now,
        deadline=now + 60,
        spec={} if action is Action.SPAWN else None,
    )


def _stores(client: redis.Redis) -> tuple[WorkloadStore, EventStore]:
    """The stores over a Redis that a rebuild has declared complete (as the first reconcile
    does for a running service)."""
    store = WorkloadStore(client, PREFIX)
    store.begin_rebuild("first", 60)
    assert store.mark_complete(rebuild_id="first", finished="now")
    return store, EventStore(client, PREFIX)


def _queue_spawn(
    store: WorkloadStore, events: EventStore, username: str, kept: str = "token-value"
) -> tuple[Operation, bool, str | None]:
    ref = lab_ref(username)
    operation = _operation(ref)
    first = events.announcement(ref.key, [(EventType.INFO, "Lab creation requested")])
    queued = store.queue_spawn(
        operation=operation, record=record_json(_record(username)), secret=kept, events=first
    )
    return operation, queued.queued, queued.current


def test_a_spawn_is_recorded_and_queued_in_one_step(redis_client: redis.Redis) -> None:
    store, events = _stores(redis_client)
    ref = lab_ref("ada")
    events.append(ref.key, EventType.INFO, "an older operation's event")
    operation, queued, current = _queue_spawn(store, events, "ada")
    assert (queued, current) == (True, None)
    found = store.operation_and_secret(ref)
    assert found.operation == operation
    assert found.secret == "token-value"
    # The secret expires a minute after the operation's deadline at the latest.
    assert 0 < redis_client.ttl(store.secret_key(ref)) <= 120
    assert store.names("lab") == ["ada"]
    assert store.pending() == [ref]
    labs = LabStore.reading(redis_client, PREFIX)
    record = labs.get("ada")
    assert record is not None and record.status == WorkloadStatus.STARTING
    assert labs.get_unless_busy("ada") == (record, True)
    assert labs.get_unless_busy("nobody") == (None, False)
    # The stream starts again: the older operation's event is gone.
    assert [e.data for e in events.read(ref.key)] == ["Lab creation requested"]
    # No lease is taken: the runner takes it when it starts the operation.
    assert store.lease_holder(ref) is None


def test_a_lab_that_is_not_failed_is_a_conflict_and_nothing_changes(
    redis_client: redis.Redis,
) -> None:
    store, events = _stores(redis_client)
    first, _, _ = _queue_spawn(store, events, "bo")
    before = {key: redis_client.dump(key) for key in redis_client.keys(f"{PREFIX}*")}
    _, queued, current = _queue_spawn(store, events, "bo", kept="other-token")
    assert not queued
    assert current is not None and json.loads(current)["status"] == "starting"
    after = {key: redis_client.dump(key) for key in redis_client.keys(f"{PREFIX}*")}
    assert after == before
    found = store.operation(lab_ref("bo"))
    assert found is not None and found.id == first.id


def test_a_failed_lab_is_replaced_but_not_while_an_operation_is_queued(
    redis_client: redis.Redis,
) -> None:
    store, events = _stores(redis_client)
    failed = record_json(_record("cy", WorkloadStatus.FAILED))
    redis_client.set(store.record_key(lab_ref("cy")), failed)
    redis_client.set(store.operation_key(lab_ref("cy")), "{}")
    _, queued, current = _queue_spawn(store, events, "cy")
    assert (queued, current) == (False, failed)
    redis_client.delete(store.operation_key(lab_ref("cy")))
    _, queued, _ = _queue_spawn(store, events, "cy")
    assert queued
    record = LabStore.reading(redis_client, PREFIX).get("cy")
    assert record is not None and record.status == WorkloadStatus.STARTING


def test_an_update_replaces_only_the_record_it_read_and_only_when_idle(
    redis_client: redis.Redis,
) -> None:
    store, events = _stores(redis_client)
    ref = lab_ref("di")
    running = record_json(_record("di", WorkloadStatus.RUNNING))
    redis_client.set(store.record_key(ref), running)
    wanted = record_json(_record("di", WorkloadStatus.STARTING))
    first = events.announcement(ref.key, [(EventType.INFO, "Update requested")])

    def update(expect: str) -> tuple[Operation, bool, str | None]:
        operation = _operation(ref)
        queued = store.queue_spawn(
            operation=operation, record=wanted, secret=None, events=first, expect=expect
        )
        return operation, queued.queued, queued.current

    # Not over a record it did not read...
    assert update(record_json(_record("di", WorkloadStatus.FAILED)))[1:] == (False, running)
    assert redis_client.get(store.record_key(ref)) == running
    # ...nor while another operation is queued...
    redis_client.set(store.operation_key(ref), "{}")
    assert update(running)[1:] == (False, running)
    redis_client.delete(store.operation_key(ref))
    # ...nor for a workload that does not exist.
    assert (
        store.queue_spawn(
            operation=_operation(lab_ref("nobody")),
            record=wanted,
            secret=None,
            events=first,
            expect=running,
        ).current
        is None
    )
    assert redis_client.get(store.record_key(lab_ref("nobody"))) is None
    operation, queued, _ = update(running)
    assert queued
    assert redis_client.get(store.record_key(ref)) == wanted
    found = store.operation(ref)
    assert found is not None and found.id == operation.id
    assert [e.data for e in events.read(ref.key)] == ["Update requested"]


def test_a_step_writes_its_record_only_while_its_operation_is_current(
    redis_client: redis.Redis,
) -> None:
    store, events = _stores(redis_client)
    operation, _, _ = _queue_spawn(store, events, "ed")
    ref = lab_ref("ed")
    halfway = record_json(_record("ed", WorkloadStatus.STARTING)).replace("starting", "running")
    assert store.put_if_current(operation=operation, record=halfway)
    assert redis_client.get(store.record_key(ref)) == halfway
    stale = _operation(ref)
    later = record_json(_record("ed", WorkloadStatus.FAILED))
    assert not store.put_if_current(operation=stale, record=later)
    assert redis_client.get(store.record_key(ref)) == halfway


def test_a_delete_supersedes_a_spawn_only_over_the_record_it_read(
    redis_client: redis.Redis,
) -> None:
    store, events = _stores(redis_client)
    ref = lab_ref("di")
    assert (
        store.queue_delete(
            operation=_operation(ref, Action.DELETE),
            expect="{}",
            record="{}",
            events=events.announcement(ref.key, []),
        )
        is DeleteQueued.MISSING
    )
    _queue_spawn(store, events, "di")
    read = store.record(ref)
    assert read is not None
    terminating = record_json(_record("di", WorkloadStatus.TERMINATING))
    deletion = _operation(ref, Action.DELETE)
    announce = events.announcement(ref.key, [(EventType.INFO, "Lab deletion requested")])
    changed = store.queue_delete(
        operation=deletion, expect=read + " ", record=terminating, events=announce
    )
    assert changed is DeleteQueued.CHANGED
    assert store.record(ref) == read
    queued = store.queue_delete(
        operation=deletion, expect=read, record=terminating, events=announce
    )
    assert queued is DeleteQueued.QUEUED
    assert store.record(ref) == terminating
    assert store.operation(ref) == deletion
    assert [e.data for e in events.read(ref.key)] == ["Lab deletion requested"]
    again = store.queue_delete(
        operation=_operation(ref, Action.DELETE),
        expect=terminating,
        record=terminating,
        events=announce,
    )
    assert again is DeleteQueued.ALREADY
    assert store.operation(ref) == deletion


def test_finishing_stores_the_outcome_only_for_the_current_operation(
    redis_client: redis.Redis,
) -> None:
    store, events = _stores(redis_client)
    ref = lab_ref("ed")
    spawn, _, _ = _queue_spawn(store, events, "ed")
    running = record_json(_record("ed", WorkloadStatus.RUNNING))
    stale = _operation(ref)
    closing = events.announcement(ref.key, [(EventType.COMPLETE, "")])
    assert not store.finish(operation=stale, record=running, events=closing)
    assert store.operation(ref) == spawn
    assert store.finish(operation=spawn, record=running, events=closing)
    assert store.record(ref) == running
    assert store.operation_and_secret(ref).secret is None
    assert store.pending() == []
    assert [e.type for e in events.read(ref.key)] == [EventType.INFO, EventType.COMPLETE]
    # A delete's outcome removes the lab from the kind's index too.
    deletion = _operation(ref, Action.DELETE)
    redis_client.set(store.operation_key(ref), json.dumps(deletion.to_json()))
    assert store.finish(operation=deletion, record=None, events=None)
    assert store.record(ref) is None and store.names("lab") == []


def test_repairs_never_undo_an_operation_or_a_newer_record(redis_client: redis.Redis) -> None:
    store, events = WorkloadStore(redis_client, PREFIX), EventStore(redis_client, PREFIX)
    labs = LabStore(redis_client, PREFIX, WorkloadReads(store))
    running = _record("fy", WorkloadStatus.RUNNING)
    assert labs.put_if_idle(running, None)
    assert labs.get("fy") == running and labs.usernames() == ["fy"]
    failed = _record("fy", WorkloadStatus.FAILED)
    # Not over a record it did not read.
    assert not labs.put_if_idle(failed, None)
    assert not labs.put_if_idle(failed, _record("fy", WorkloadStatus.STARTING))
    # Not while an operation runs.
    redis_client.set(store.operation_key(lab_ref("fy")), "{}")
    assert not labs.put_if_idle(failed, running)
    redis_client.delete(store.operation_key(lab_ref("fy")))
    assert labs.put_if_idle(failed, running)
    assert labs.get("fy") == failed
    assert events.read(lab_ref("fy").key) == []


def test_a_queued_spawn_is_pending_for_whichever_runner_leases_it_first(
    redis_client: redis.Redis,
) -> None:
    store, events = _stores(redis_client)
    ref = lab_ref("gu")
    first = events.announcement(ref.key, [(EventType.INFO, "Lab creation requested")])
    queued = store.queue_spawn(
        operation=_operation(ref), record=record_json(_record("gu")), secret="t", events=first
    )
    assert queued.queued
    assert store.lease_holder(ref) is None
    assert ref in store.pending()
    # Its run announces what it does itself: the stream holds only what was queued.
    assert [e.data for e in events.read(ref.key)] == ["Lab creation requested"]


# Completeness. -----------------------------------------------------------------------------


def test_an_empty_redis_is_not_complete_until_a_rebuild_ends(redis_client: redis.Redis) -> None:
    store, events = WorkloadStore(redis_client, PREFIX), EventStore(redis_client, PREFIX)
    ref = lab_ref("ada")
    assert store.stored_record(ref).complete is False
    assert store.stored_names("lab").complete is False
    # No spawn for a workload Redis may only not have rebuilt yet.
    first = events.announcement(ref.key, [(EventType.INFO, "Lab creation requested")])
    refused = store.queue_spawn(
        operation=_operation(ref), record=record_json(_record("ada")), secret=None, events=first
    )
    assert (refused.queued, refused.rebuilding) == (False, True)
    assert redis_client.exists(store.record_key(ref), store.operation_key(ref)) == 0

    store.begin_rebuild("r1", 60)
    assert store.mark_complete(rebuild_id="r1", finished="t1")
    assert store.is_complete()
    assert store.stored_record(ref) == StoredRecord(None, True)
    assert store.stored_names("lab") == StoredNames([], True)
    assert not redis_client.exists(store.rebuilding_key)


def test_a_rebuild_during_which_redis_was_emptied_does_not_declare_it_complete(
    redis_client: redis.Redis,
) -> None:
    store = WorkloadStore(redis_client, PREFIX)
    store.begin_rebuild("r1", 60)
    redis_client.flushdb()
    assert not store.mark_complete(rebuild_id="r1", finished="t1")
    assert not store.is_complete()
    # Nor does an older rebuild, once a newer one has begun.
    store.begin_rebuild("r1", 60)
    store.begin_rebuild("r2", 60)
    assert not store.mark_complete(rebuild_id="r1", finished="t1")
    assert store.mark_complete(rebuild_id="r2", finished="t2")


def test_a_record_is_served_while_the_rest_is_rebuilt(redis_client: redis.Redis) -> None:
    store, events = _stores(redis_client)
    _queue_spawn(store, events, "ada")
    redis_client.delete(store.complete_key)
    stored = store.stored_record(lab_ref("ada"))
    assert stored.record is not None and stored.complete is False
    assert store.stored_names("lab") == StoredNames(["ada"], False)

"""Workloads' records, operations, leases and operation secrets in Redis, for every kind.

The engine's one storage contract. Records are kept as the JSON text their kind wrote (a
lab's is its status body, served as stored); the store reads one field of them only, in
its scripts: ``status``, where ``failed`` may be replaced by a new spawn and
``terminating`` is set by a delete's caller. Every state change that must not race
(queueing an operation, finishing one, a watcher's repair) is one Lua script from ``lua/``,
so two workers or replicas can never both start a spawn of the same workload or overwrite
each other's outcome.

Keys, with the configured prefix in front: ``<kind>:<name>`` (record), ``<kind>s`` (the
kind's names), ``op:<kind>:<name>``, ``lease:<kind>:<name>``, ``secret:<kind>:<name>``,
``ops``, the pending operations of every kind ordered by when they were queued, and
``complete`` with ``rebuilding`` (below).

**Completeness.** Redis can come back empty (a restart without persistence, a flush) while
labs run on. An empty Redis must then never read as an empty platform: ``complete`` is set
only by a rebuild from Kubernetes that ran to its end (``mark_complete``), and goes with
everything else when Redis is emptied. Until it is back, a read that finds no record cannot
tell "none" from "not rebuilt yet" (``StoredRecord.complete``), and no spawn is queued for a
workload without a record.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

import redis

from app.models.workload import Operation, WorkloadRef
from app.storage import scripts
from app.storage.admin_feed import admin_feed_channel
from app.storage.admission import AdmissionRequest
from app.storage.direct_reads import DirectReads
from app.storage.events import Announcement
from app.storage.leader import Fence, LeadershipLost, RedisLease


@dataclass(frozen=True)
class SpawnQueued:
    """What ``queue_spawn`` did: ``queued``, or refused because of ``current`` (the record
    that is not failed, or None when only an operation still stood in the way)."""

    queued: bool
    current: str | None = None
    rebuilding: bool = False
    """Refused because Redis is being rebuilt and has no record of the workload yet."""
    position: int = 0
    """Queued to wait for admission, at this position in the queue (0: not waiting)."""
    queue_full: bool = False
    """Refused, nothing written: it would have waited, and the admission queue is full."""


@dataclass(frozen=True)
class FailedWorkload:
    """A workload whose record says ``failed``, and since when (Unix time, in seconds)."""

    name: str
    failed_at: float


class DeleteQueued(StrEnum):
    """What ``queue_delete`` did."""

    QUEUED = "queued"
    MISSING = "missing"
    """There is no such workload."""
    ALREADY = "already"
    """It is terminating already."""
    CHANGED = "changed"
    """Its record changed since the caller read it: read again and retry."""
    NOT_FAILED = "not_failed"
    """Asked to delete it only if failed: it is not (or an operation is queued for it)."""


@dataclass(frozen=True)
class OperationAndSecret:
    """A workload's current operation and the secret kept beside it (a spawn's token)."""

    operation: Operation | None
    secret: str | None


@dataclass(frozen=True)
class StoredRecord:
    """A workload's record as a reader finds it, and whether Redis holds every workload:
    when it does not, a missing record means "not rebuilt yet", not "none"."""

    record: str | None
    complete: bool


@dataclass(frozen=True)
class StoredNames:
    """The names of a kind's workloads, and whether Redis holds every workload (if not,
    the list may lack some)."""

    names: list[str]
    complete: bool


@dataclass(frozen=True)
class IdleWrite:
    """One write of ``WorkloadStore.put_many_if_idle``: ``record`` for ``ref``, if its
    record is still ``expect`` (None: there is none) and no operation runs for it."""

    ref: WorkloadRef
    record: str
    expect: str | None


@dataclass(frozen=True)
class RecordAndBusy:
    """A workload's record, and whether an operation is under way for it."""

    record: str | None
    busy: bool


class WorkloadStore:
    """All Redis state about workloads except their event streams."""

    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._redis = client
        self._direct = DirectReads.of(client)
        """The status read's path (``stored_record``): see the module."""
        self._p = key_prefix
        self.feed_channel = admin_feed_channel(key_prefix)
        """Every record change is announced here, in the same step (``AdminFeed``)."""
        self._queue_spawn = scripts.load(client, "queue_spawn")
        self._put_if_current = scripts.load(client, "put_if_current")
        self._queue_delete = scripts.load(client, "queue_delete")
        self._finish = scripts.load(client, "finish_operation")
        self._put_if_idle = scripts.load(client, "put_if_idle")
        self._mark_complete = scripts.load(client, "mark_complete")

    # Keys ----------------------------------------------------------------------------

    def record_key(self, ref: WorkloadRef) -> str:
        return f"{self._p}{ref.kind}:{ref.name}"

    def index_key(self, kind: str) -> str:
        return f"{self._p}{kind}s"

    def operation_key(self, ref: WorkloadRef) -> str:
        return f"{self._p}op:{ref.key}"

    def lease_key(self, ref: WorkloadRef) -> str:
        return f"{self._p}lease:{ref.key}"

    def secret_key(self, ref: WorkloadRef) -> str:
        return f"{self._p}secret:{ref.key}"

    def failed_key(self, kind: str) -> str:
        """The kind's failure times: names by the Unix time their record became ``failed``
        (kept by ``record_changed.lua`` with every record change)."""
        return f"{self._p}failed:{kind}"

    @property
    def pending_key(self) -> str:
        return f"{self._p}ops"

    @property
    def complete_key(self) -> str:
        return f"{self._p}complete"

    @property
    def rebuilding_key(self) -> str:
        return f"{self._p}rebuilding"

    # Reads ---------------------------------------------------------------------------

    def record(self, ref: WorkloadRef) -> str | None:
        raw = self._redis.get(self.record_key(ref))
        return str(raw) if raw else None

    def stored_record(self, ref: WorkloadRef) -> StoredRecord:
        """The record and whether Redis is complete, in one round trip (on a connection
        of the direct reads when one is free: JupyterHub asks this all day)."""
        keys = (self.record_key(ref), self.complete_key)
        values = self._direct.mget(*keys) if self._direct is not None else None
        if values is None:
            values = cast(list[str | None], self._redis.mget(*keys))
        raw, complete = values
        return StoredRecord(raw or None, complete is not None)

    def stored_names(self, kind: str) -> StoredNames:
        """The kind's names and whether Redis is complete, in one round trip (on a
        connection of the direct reads when one is free, as the status read)."""
        commands = (("SMEMBERS", self.index_key(kind)), ("EXISTS", self.complete_key))
        replies = self._direct.replies(*commands) if self._direct is not None else None
        if replies is None:
            pipe = self._redis.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            replies = pipe.execute()
        names, complete = replies
        return StoredNames(sorted(cast(Iterable[str], names)), bool(complete))

    def is_complete(self) -> bool:
        return bool(self._redis.exists(self.complete_key))

    def begin_rebuild(self, rebuild_id: str, ttl_seconds: float) -> None:
        """Note that a rebuild started; ``mark_complete`` needs the note to still be there."""
        self._redis.set(self.rebuilding_key, rebuild_id, px=max(1, int(ttl_seconds * 1000)))

    def mark_complete(self, *, rebuild_id: str, finished: str, fence: Fence | None = None) -> bool:
        """Declare Redis complete after the rebuild ``rebuild_id``; False, and nothing
        written, when Redis was emptied since it began (its note is gone). ``fence``: the
        reconcile's tenure, refused with ``LeadershipLost`` once it is over."""
        keys = [self.rebuilding_key, self.complete_key]
        args = [rebuild_id, finished]
        if fence is not None:
            keys.append(fence.key)
            args.append(fence.value)
        return _unfenced(self._mark_complete(keys=keys, args=args)) == 1

    def names(self, kind: str) -> list[str]:
        """The names of every workload of ``kind`` with a record, sorted."""
        return sorted(cast(set[str], self._redis.smembers(self.index_key(kind))))

    def records(self, kind: str) -> dict[str, str]:
        """Every record of ``kind`` by name, in two round trips however many there are."""
        names = self.names(kind)
        if not names:
            return {}
        keys = [self.record_key(WorkloadRef(kind, name)) for name in names]
        raws = cast(list[str | None], self._redis.mget(keys))
        return {name: raw for name, raw in zip(names, raws, strict=True) if raw}

    def failed(
        self, kind: str, *, before: float | None = None, limit: int = 1000
    ) -> list[FailedWorkload]:
        """The workloads of ``kind`` whose record says ``failed``, with when it became so,
        oldest first, at most ``limit``; with ``before`` (Unix time), only those that
        failed before it."""
        found = cast(
            list[tuple[str, float]],
            self._redis.zrangebyscore(
                self.failed_key(kind),
                "-inf",
                f"({before}" if before is not None else "+inf",
                start=0,
                num=limit,
                withscores=True,
            ),
        )
        return [FailedWorkload(name=name, failed_at=float(at)) for name, at in found]

    def record_and_busy(self, ref: WorkloadRef) -> RecordAndBusy:
        """In one round trip: a watcher asks both for every change it sees."""
        raw, operation = cast(
            list[str | None], self._redis.mget(self.record_key(ref), self.operation_key(ref))
        )
        return RecordAndBusy(raw or None, operation is not None)

    def operation(self, ref: WorkloadRef) -> Operation | None:
        raw = self._redis.get(self.operation_key(ref))
        return Operation.from_json(json.loads(raw)) if raw else None

    def operation_and_secret(self, ref: WorkloadRef) -> OperationAndSecret:
        """In one round trip: a worker picking a spawn up needs both before it starts."""
        raw, secret = cast(
            list[str | None], self._redis.mget(self.operation_key(ref), self.secret_key(ref))
        )
        operation = Operation.from_json(json.loads(raw)) if raw else None
        return OperationAndSecret(operation, str(secret) if secret else None)

    def pending(self) -> list[WorkloadRef]:
        """Workloads with an operation queued or under way, oldest first."""
        members = cast(list[str], self._redis.zrange(self.pending_key, 0, -1))
        return [WorkloadRef.from_key(member) for member in members]

    def lease(self, ref: WorkloadRef, owner: str, ttl_seconds: float) -> RedisLease:
        """The lease that decides which worker runs ``ref``'s operations."""
        return RedisLease(self._redis, self.lease_key(ref), owner, ttl_seconds)

    def lease_holder(self, ref: WorkloadRef) -> str | None:
        value = self._redis.get(self.lease_key(ref))
        return str(value) if value else None

    # Queueing operations -------------------------------------------------------------

    def queue_spawn(
        self,
        *,
        operation: Operation,
        record: str,
        secret: str | None,
        events: Announcement,
        expect: str | None = None,
        admission: AdmissionRequest | None = None,
    ) -> SpawnQueued:
        """Record a new workload and queue its spawn, unless one exists that has not failed
        (or an operation is still queued for it). With ``expect``, replace that record, and
        only it, with ``record`` and queue the spawn that brings the workload to it: an
        update of a workload that exists (refused, with the current record, while another
        operation is queued for it or after the record changed).

        One atomic step: the check, the record, the queued operation, its ``secret`` (kept
        beside the operation, never in the record, so a worker that resumes the spawn can
        still use it; it expires a minute after the operation's deadline and goes when the
        operation ends) and the restarted event stream with ``events``. Whichever runner
        leases the workload first runs the operation. With ``admission``, the spawn takes a
        place in progress, or else waits in the admission queue, unpending (``position``),
        or is refused when the queue is full (``queue_full``); see ``app.storage.admission``.
        """
        ref = operation.ref
        arguments: dict[str, Any] = {
            "record": record,
            "operation": json.dumps(operation.to_json()),
            "kind": ref.kind,
            "name": ref.name,
            "member": ref.key,
            # A string: a number would lose digits on its way through Lua.
            "queued_at": repr(operation.started),
            "secret": secret or "",
            "secret_ttl": max(1, int(operation.deadline - operation.started) + 60),
            "feed": self.feed_channel,
            "expect": expect or "",
            "events": events.batch(),
        }
        if admission is not None:
            arguments["admission"] = admission.arguments(operation.id)
        reply = cast(
            list[int | str],
            self._queue_spawn(
                keys=[
                    self.record_key(ref),
                    self.operation_key(ref),
                    self.index_key(ref.kind),
                    self.pending_key,
                    self.secret_key(ref),
                    events.stream,
                    self.complete_key,
                    self.failed_key(ref.kind),
                    *(admission.keys if admission is not None else ()),
                ],
                args=[json.dumps(arguments)],
            ),
        )
        if int(reply[0]) == 1:
            return SpawnQueued(queued=True)
        if int(reply[0]) == 2:
            return SpawnQueued(queued=True, position=int(reply[1]))
        if int(reply[0]) == -2:
            return SpawnQueued(queued=False, queue_full=True)
        if int(reply[0]) == -1:
            return SpawnQueued(queued=False, rebuilding=True)
        return SpawnQueued(queued=False, current=str(reply[1]) or None)

    def queue_delete(
        self,
        *,
        operation: Operation,
        expect: str,
        record: str,
        events: Announcement,
        failed_only: bool = False,
    ) -> DeleteQueued:
        """Replace the record read as ``expect`` with ``record`` (the kind's terminating
        record) and queue the deletion, superseding a spawn under way, with a new event
        stream starting with ``events``. ``failed_only``: only while the record says
        ``failed`` and no operation is queued (``NOT_FAILED`` otherwise)."""
        ref = operation.ref
        reply = self._queue_delete(
            keys=[
                self.record_key(ref),
                self.operation_key(ref),
                self.pending_key,
                events.stream,
                self.failed_key(ref.kind),
            ],
            args=[
                expect,
                record,
                json.dumps(operation.to_json()),
                ref.kind,
                ref.name,
                ref.key,
                operation.started,
                self.feed_channel,
                "1" if failed_only else "0",
                *events.args,
            ],
        )
        return DeleteQueued(str(reply))

    # Outcomes ------------------------------------------------------------------------

    def finish(
        self, *, operation: Operation, record: str | None, events: Announcement | None
    ) -> bool:
        """End ``operation``: store ``record`` (None removes the workload), dequeue it, drop
        its secret and append ``events``, in one atomic step. False, and nothing changed,
        when the operation was superseded meanwhile."""
        ref = operation.ref
        keys = [
            self.operation_key(ref),
            self.record_key(ref),
            self.index_key(ref.kind),
            self.secret_key(ref),
            self.pending_key,
            events.stream if events is not None else "",
            self.failed_key(ref.kind),
        ]
        args: list[str | int] = [
            operation.id,
            record if record is not None else "",
            ref.kind,
            ref.name,
            ref.key,
            self.feed_channel,
            *(events.args if events is not None else []),
        ]
        return bool(self._finish(keys=keys, args=args))

    def put_if_current(self, *, operation: Operation, record: str) -> bool:
        """Write ``record`` while ``operation`` is still the current one for its workload: a
        step saying how far it got. False, and nothing written, once it was superseded."""
        ref = operation.ref
        keys = [
            self.operation_key(ref),
            self.record_key(ref),
            self.index_key(ref.kind),
            self.failed_key(ref.kind),
        ]
        args = [operation.id, record, ref.kind, ref.name, self.feed_channel]
        return bool(self._put_if_current(keys=keys, args=args))

    def put_if_idle(
        self, *, ref: WorkloadRef, record: str, expect: str | None, fence: Fence | None = None
    ) -> bool:
        """Write ``record`` only while no operation runs for ``ref`` and its record is still
        ``expect`` (None: there is none). Repairs use it, so they never undo an operation's
        outcome: any operation that started or ended since the caller read changes one.
        ``fence``: an elected loop's tenure; once it is over the write is refused with
        ``LeadershipLost``."""
        keys, args = self._idle_write(IdleWrite(ref, record, expect), fence)
        return _unfenced(self._put_if_idle(keys=keys, args=args)) == 1

    def put_many_if_idle(
        self, *, writes: list[IdleWrite], fence: Fence | None = None
    ) -> list[bool]:
        """``put_if_idle`` for each write, all in one round trip (each write stays atomic on
        its own); whether each was written, in order. A rebuild writes hundreds at once."""
        if not writes:
            return []
        pipeline = self._redis.pipeline(transaction=False)
        for write in writes:
            keys, args = self._idle_write(write, fence)
            self._put_if_idle(keys=keys, args=args, client=pipeline)
        return [_unfenced(result) == 1 for result in pipeline.execute()]

    def _idle_write(self, write: IdleWrite, fence: Fence | None) -> tuple[list[str], list[str]]:
        """``put_if_idle.lua``'s keys and arguments for ``write``."""
        ref = write.ref
        keys = [
            self.record_key(ref),
            self.operation_key(ref),
            self.index_key(ref.kind),
            self.failed_key(ref.kind),
        ]
        args = [write.record, write.expect or "", ref.kind, ref.name, self.feed_channel]
        if fence is not None:
            keys.append(fence.key)
            args.append(fence.value)
        return keys, args


def _unfenced(reply: object) -> int:
    """A fenced script's reply as a number; ``LeadershipLost`` for its refusal (-1)."""
    result = int(cast(int, reply))
    if result == -1:
        raise LeadershipLost("the elected loop's lease moved; its write was refused")
    return result

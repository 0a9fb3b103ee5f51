"""Lab records, operations, leases and provisioned-user flags in Redis.

Every state change that must not race (starting an operation, finishing one) is a Redis
transaction guarded by WATCH, so two workers or replicas can never both start a spawn for
the same user or overwrite each other's outcome.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import cast

import redis
from redis.client import Pipeline

from app.models.lab import LabRecord, LabStatus, Operation
from app.storage.events import ADD_AND_PUBLISH, Announcement
from app.storage.leader import RedisLease


class StartResult(Enum):
    STARTED = "started"
    CONFLICT = "conflict"
    MISSING = "missing"
    ALREADY = "already"


@dataclass(frozen=True)
class StartOutcome:
    result: StartResult
    current: LabRecord | None = None
    leased: bool = False
    """The lease asked for with the operation was taken."""
    provisioned: bool = False
    """With the lease: the user was provisioned already (no need to ask again)."""


@dataclass(frozen=True)
class LeaseClaim:
    """Who takes a user's lease together with the operation it queues, and for how long."""

    owner: str
    ttl_ms: int


# KEYS: lab record, operation, lab set, pending operations, token, event stream, lease,
# provisioned users.
# ARGV: record JSON, operation JSON, username, queued-at score, token, token TTL seconds,
# lease owner ("" takes none), lease TTL ms, how many of the following arguments are
# ``add_all``'s for the stream's first events, those, then ``add_all``'s arguments for the
# events to add only if the lease was taken (none at all for no such events). Returns the
# current record's JSON ("" if none) on a conflict, else 0 if the lease was not taken, and
# if it was, 1, plus 2 when the user was provisioned already. A lab that is not
# ``LabStatus.FAILED`` is a conflict.
_START_SPAWN = (
    ADD_AND_PUBLISH
    + """
local raw = redis.call('GET', KEYS[1])
if raw and cjson.decode(raw)['status'] ~= 'failed' then
  return raw
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return raw or ''
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[3])
redis.call('SET', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[3])
redis.call('SET', KEYS[5], ARGV[5], 'EX', ARGV[6])
local leased = 0
if ARGV[7] ~= '' and redis.call('SET', KEYS[7], ARGV[7], 'NX', 'PX', ARGV[8]) then
  leased = 1
end
local rest = 10 + tonumber(ARGV[9])
redis.call('DEL', KEYS[6])
add_all(KEYS[6], 10, rest - 1)
if leased == 0 then
  return 0
end
if #ARGV >= rest then
  add_all(KEYS[6], rest)
end
if redis.call('SISMEMBER', KEYS[8], ARGV[3]) == 1 then
  return 3
end
return 1
"""
)


# KEYS: operation, lab record, lab set, token, pending operations, event stream.
# ARGV: operation id, record JSON ("" removes the lab), finish (1/0), username, then
# ``add_all``'s arguments when there are events to append.
_FINISH = (
    ADD_AND_PUBLISH
    + """
local raw = redis.call('GET', KEYS[1])
if not raw or cjson.decode(raw)['id'] ~= ARGV[1] then
  return 0
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[2])
  redis.call('SREM', KEYS[3], ARGV[4])
else
  redis.call('SET', KEYS[2], ARGV[2])
  redis.call('SADD', KEYS[3], ARGV[4])
end
if ARGV[3] == '1' then
  redis.call('DEL', KEYS[1], KEYS[4])
  redis.call('ZREM', KEYS[5], ARGV[4])
end
if #ARGV > 4 then
  add_all(KEYS[6], 5)
end
return 1
"""
)


class LabStore:
    """All Redis state about labs except their event streams."""

    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._redis = client
        self._p = key_prefix
        self._finish_script = client.register_script(_FINISH)
        self._start_spawn_script = client.register_script(_START_SPAWN)

    # Keys ----------------------------------------------------------------------------

    def _lab(self, username: str) -> str:
        return f"{self._p}lab:{username}"

    def _op(self, username: str) -> str:
        return f"{self._p}op:{username}"

    def operation_key(self, username: str) -> str:
        """The key holding the user's current operation (for guarded writes elsewhere)."""
        return self._op(username)

    def _token(self, username: str) -> str:
        return f"{self._p}optoken:{username}"

    def _lease(self, username: str) -> str:
        return f"{self._p}lease:{username}"

    @property
    def _labs(self) -> str:
        return f"{self._p}labs"

    @property
    def _ops(self) -> str:
        return f"{self._p}ops"

    @property
    def _provisioned(self) -> str:
        return f"{self._p}provisioned"

    # Reads ---------------------------------------------------------------------------

    def get_json(self, username: str) -> str | None:
        """The record as stored: already the status routes' JSON body."""
        raw = self._redis.get(self._lab(username))
        return str(raw) if raw else None

    def get(self, username: str) -> LabRecord | None:
        raw = self._redis.get(self._lab(username))
        return LabRecord.from_json(json.loads(raw)) if raw else None

    def get_unless_busy(self, username: str) -> tuple[LabRecord | None, bool]:
        """The record, and whether an operation is running for the user, in one round
        trip (the watcher asks both for every pod change it sees)."""
        raw, operation = cast(
            list[str | None], self._redis.mget(self._lab(username), self._op(username))
        )
        record = LabRecord.from_json(json.loads(raw)) if raw else None
        return record, operation is not None

    def usernames(self) -> list[str]:
        return sorted(cast(set[str], self._redis.smembers(self._labs)))

    def operation(self, username: str) -> Operation | None:
        raw = self._redis.get(self._op(username))
        return Operation.from_json(json.loads(raw)) if raw else None

    def operation_and_token(self, username: str) -> tuple[Operation | None, str | None]:
        """The current operation and the spawn's token, in one round trip (a worker picking
        up a spawn needs both before its first Kubernetes call)."""
        raw, token = cast(
            list[str | None], self._redis.mget(self._op(username), self._token(username))
        )
        operation = Operation.from_json(json.loads(raw)) if raw else None
        return operation, (str(token) if token else None)

    def pending_operations(self) -> list[str]:
        """Users with an operation in progress, oldest first."""
        return cast(list[str], self._redis.zrange(self._ops, 0, -1))

    # Starting operations -------------------------------------------------------------

    def start_spawn(
        self,
        record: LabRecord,
        operation: Operation,
        first_event: Announcement,
        token: str,
        lease: LeaseClaim | None = None,
        if_leased: Announcement | None = None,
    ) -> StartOutcome:
        """Record a new lab and its spawn unless a lab that is not failed exists.

        One script, so one round trip: the check, the record, the queued operation, the
        restarted event stream and, with ``lease``, the user's lease for the worker that
        will run the spawn at once (it need not ask Redis again before its first
        Kubernetes call). The user's delegated token is kept beside the operation (never
        in the record) so a worker that resumes the spawn can still create the lab's
        Secret; it expires with the operation's deadline and is deleted when it ends.
        ``if_leased`` events are appended only if the lease was taken: the worker that
        runs the spawn at once announces its start here rather than in a write of its own.
        """
        username = record.username
        keys = [
            self._lab(username),
            self._op(username),
            self._labs,
            self._ops,
            self._token(username),
            first_event.stream,
            self._lease(username),
            self._provisioned,
        ]
        ttl = max(1, int(operation.deadline - operation.started) + 60)
        args: list[str | int | float] = [
            json.dumps(record.to_json()),
            json.dumps(operation.to_json()),
            username,
            operation.started,
            token,
            ttl,
            lease.owner if lease is not None else "",
            lease.ttl_ms if lease is not None else 0,
            len(first_event.args),
            *first_event.args,
            *(if_leased.args if if_leased is not None else ()),
        ]
        result = self._start_spawn_script(keys=keys, args=args)
        if isinstance(result, str):
            current = LabRecord.from_json(json.loads(result)) if result else None
            return StartOutcome(StartResult.CONFLICT, current)
        code = int(result)
        return StartOutcome(
            StartResult.STARTED, record, leased=bool(code & 1), provisioned=bool(code & 2)
        )

    def start_delete(
        self, username: str, operation: Operation, reset_events: Callable[[Pipeline], None]
    ) -> StartOutcome:
        """Mark the lab terminating and queue its deletion; supersedes a running spawn."""
        lab_key, op_key = self._lab(username), self._op(username)
        outcome: list[StartOutcome] = []

        def attempt(pipe: Pipeline) -> None:
            outcome.clear()
            raw = pipe.get(lab_key)
            if not raw:
                outcome.append(StartOutcome(StartResult.MISSING))
                pipe.multi()
                return
            current = LabRecord.from_json(json.loads(raw))
            if current.status == LabStatus.TERMINATING:
                outcome.append(StartOutcome(StartResult.ALREADY, current))
                pipe.multi()
                return
            current.status = LabStatus.TERMINATING
            current.error = None
            pipe.multi()
            pipe.set(lab_key, json.dumps(current.to_json()))
            self._queue(pipe, operation)
            reset_events(pipe)
            outcome.append(StartOutcome(StartResult.STARTED, current))

        self._redis.transaction(attempt, lab_key, op_key)
        return outcome[0]

    def _queue(self, pipe: Pipeline, operation: Operation) -> None:
        pipe.set(self._op(operation.username), json.dumps(operation.to_json()))
        pipe.zadd(self._ops, {operation.username: operation.started})

    # Progress and outcome ------------------------------------------------------------

    def is_current(self, operation: Operation) -> bool:
        current = self.operation(operation.username)
        return current is not None and current.id == operation.id

    def update_if_current(self, operation: Operation, record: LabRecord) -> bool:
        """Write ``record`` only while ``operation`` is still the user's operation."""
        return self._finish(operation, record, finish=False, announce=None)

    def finish(
        self,
        operation: Operation,
        record: LabRecord | None,
        announce: Announcement | None = None,
    ) -> bool:
        """End ``operation``: store ``record`` (or remove the lab when None), dequeue, and
        append ``announce``'s events, all in one atomic step and one round trip: a client
        that reads ``complete`` then finds the lab's final record, and the end of a spawn
        costs one round trip instead of five.

        Does nothing and returns False if the operation was superseded meanwhile.
        """
        return self._finish(operation, record, finish=True, announce=announce)

    def _finish(
        self,
        operation: Operation,
        record: LabRecord | None,
        *,
        finish: bool,
        announce: Announcement | None,
    ) -> bool:
        username = operation.username
        keys = [
            self._op(username),
            self._lab(username),
            self._labs,
            self._token(username),
            self._ops,
            announce.stream if announce is not None else "",
        ]
        args: list[str | int] = [
            operation.id,
            json.dumps(record.to_json()) if record is not None else "",
            1 if finish else 0,
            username,
            *(announce.args if announce is not None else []),
        ]
        return bool(self._finish_script(keys=keys, args=args))

    # Records maintained by the watcher -----------------------------------------------

    def records(self) -> dict[str, LabRecord]:
        """Every lab record by username, in two round trips however many labs there are.

        The reconcile compares all of them with Kubernetes at once; one GET per lab would
        make it cost a round trip per user.
        """
        names = self.usernames()
        if not names:
            return {}
        raws = cast(list[str | None], self._redis.mget([self._lab(n) for n in names]))
        return {
            name: LabRecord.from_json(json.loads(raw))
            for name, raw in zip(names, raws, strict=True)
            if raw
        }

    def put_if_idle(self, record: LabRecord, expect: LabRecord | None) -> bool:
        """Replace the record when no operation runs and it still equals ``expect``."""
        lab_key, op_key = self._lab(record.username), self._op(record.username)
        done: list[bool] = []

        def attempt(pipe: Pipeline) -> None:
            done.clear()
            raw = pipe.get(lab_key)
            now = LabRecord.from_json(json.loads(raw)) if raw else None
            busy = pipe.exists(op_key)
            pipe.multi()
            if busy or now != expect:
                done.append(False)
                return
            pipe.set(lab_key, json.dumps(record.to_json()))
            pipe.sadd(self._labs, record.username)
            done.append(True)

        self._redis.transaction(attempt, lab_key, op_key)
        return done[0]

    # Leases --------------------------------------------------------------------------

    def lease(self, username: str, owner: str, ttl_seconds: float) -> RedisLease:
        """The lease that decides which worker runs ``username``'s operations."""
        return RedisLease(self._redis, self._lease(username), owner, ttl_seconds)

    def lease_holder(self, username: str) -> str | None:
        value = self._redis.get(self._lease(username))
        return str(value) if value else None

    # Provisioning --------------------------------------------------------------------

    def is_provisioned(self, username: str) -> bool:
        return bool(self._redis.sismember(self._provisioned, username))

    def mark_provisioned(self, username: str) -> None:
        self._redis.sadd(self._provisioned, username)

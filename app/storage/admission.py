"""Fair admission's state in Redis: the places in progress and the queue of operations
waiting for one, shared by every worker and replica.

Keys, with the configured prefix in front:

- ``admission:running``, a hash: workload key -> id of its admitted operation. A place
  belongs to its operation, not to a worker: a worker that dies mid-spawn leaves its
  operation to be resumed elsewhere, still in its place; the place goes when the operation
  ends or is superseded (given back by whoever ran it, or dropped by the next count that
  finds the operation gone).
- ``admission:queue``, a sorted set of waiting operations by turn, then arrival (see
  ``lua/admission.lua`` for the fairness rule).
- ``admission:waiting``, a hash: workload key -> its queue member and last announced
  position.
- ``admission:groups``, a hash: group -> its last turn and how many it has waiting.
- ``admission:state``, a hash: the turn last admitted and an arrival counter.

A waiting operation is recorded like any other (its record, ``op:``, secret and event
stream are written by ``queue_spawn.lua`` in the same step as it joins the queue) but is
left out of the pending operations (``ops``), so no runner takes it until it is admitted;
admitting it adds it there. Every change is one Lua script: ``queue_spawn.lua`` (join the
queue or take a place) and ``admit.lua`` (an admission pass).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, cast

import redis

from app.models.workload import WorkloadRef
from app.storage import scripts


class AdmissionKeys(NamedTuple):
    """The admission keys (see above), in the order the Lua scripts take them."""

    running: str
    queue: str
    waiting: str
    groups: str
    state: str

    @classmethod
    def under(cls, prefix: str) -> AdmissionKeys:
        return cls(*(f"{prefix}admission:{name}" for name in cls._fields))


@dataclass(frozen=True)
class AdmissionRequest:
    """Admission asked for with a spawn being queued (``WorkloadStore.queue_spawn``): the
    spawn takes a place at once if one is free and nobody waits, else waits its turn."""

    keys: tuple[str, ...]
    """The admission keys, in ``queue_spawn.lua``'s order."""
    group: str
    """Whose turn the spawn waits for."""
    places: int
    max_waiting: int
    prefix: str
    channel: str
    """The events channel (a waiting operation's positions are events)."""
    position_text: str
    """The event telling a waiting operation its position; ``{position}`` is replaced."""

    def arguments(self, operation_id: str) -> dict[str, str | int]:
        """``queue_spawn.lua``'s ``admission`` argument, by name."""
        return {
            "group": self.group,
            "operation_id": operation_id,
            "places": self.places,
            "max_waiting": self.max_waiting,
            "prefix": self.prefix,
            "channel": self.channel,
            "position": self.position_text,
        }


@dataclass(frozen=True)
class Waiting:
    """An operation in the queue, as ``AdmissionStore.queue`` lists it."""

    position: int
    group: str
    ref: WorkloadRef
    operation_id: str


class AdmissionStore:
    """The places in progress and the queue, for the engine's ``Admission``."""

    def __init__(
        self, client: redis.Redis, key_prefix: str, *, pending_key: str, events_channel: str
    ) -> None:
        self._redis = client
        self._p = key_prefix
        self._pending_key = pending_key
        self._events_channel = events_channel
        self._admit = scripts.load(client, "admit")
        self.keys = AdmissionKeys.under(key_prefix)

    # Requests and passes -------------------------------------------------------------

    def request(
        self, *, group: str, places: int, max_waiting: int, position_text: str
    ) -> AdmissionRequest:
        return AdmissionRequest(
            keys=self.keys,
            group=group,
            places=places,
            max_waiting=max_waiting,
            prefix=self._p,
            channel=self._events_channel,
            position_text=position_text,
        )

    def admit(
        self,
        *,
        places: int,
        position_text: str,
        started_text: str,
        release: tuple[WorkloadRef, str] | None = None,
        withdraw: WorkloadRef | None = None,
    ) -> list[WorkloadRef]:
        """An admission pass (``admit.lua``): give back the place of ``release`` (a
        workload and the id of its operation that ended) if that operation is no longer
        current, withdraw ``withdraw``'s waiting operation if it was superseded, then admit
        waiting operations into the free places (all of them when ``places`` is 0). The
        workloads admitted, in order: they are pending now, for any runner to take."""
        reply = self._admit(
            keys=[*self.keys, self._pending_key],
            args=[
                places,
                self._p,
                self._events_channel,
                position_text,
                started_text,
                release[0].key if release is not None else "",
                release[1] if release is not None else "",
                withdraw.key if withdraw is not None else "",
            ],
        )
        return [WorkloadRef.from_key(str(key)) for key in cast(list[str], reply)]

    # Reads ---------------------------------------------------------------------------

    def waiting_operation(self, ref: WorkloadRef) -> str | None:
        """The id of ``ref``'s operation waiting in the queue, if one is."""
        raw = self._redis.hget(self.keys.waiting, ref.key)
        if not raw:
            return None
        return str(raw).rsplit("\n", 1)[-1]

    def queue(self) -> list[Waiting]:
        """Every waiting operation, in the order they will be admitted."""
        members = cast(list[str], self._redis.zrange(self.keys.queue, 0, -1))
        found = []
        for position, member in enumerate(members, start=1):
            _, group, key, operation_id = member.split("\n", 3)
            found.append(Waiting(position, group, WorkloadRef.from_key(key), operation_id))
        return found

    def in_progress(self) -> dict[WorkloadRef, str]:
        """The places taken: each workload with the id of its admitted operation (some may
        have ended; the next pass that finds the places full drops them)."""
        held = cast(dict[str, str], self._redis.hgetall(self.keys.running))
        return {WorkloadRef.from_key(key): operation for key, operation in held.items()}

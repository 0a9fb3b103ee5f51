"""What every kind's service answers the same way: one workload, a list, a deletion and
the events of its operations, read through the engine.

A kind's service adds its own checks and its creation; these answers it inherits, so every
kind says ``rebuilding`` (503) and not "none" while Redis is rebuilt from Kubernetes, names
what is missing the same way, and serves its events with replay and ``Last-Event-ID``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from app.engine.engine import Engine, UnknownEventId
from app.errors import InvalidRequestError, NotFoundError
from app.models.workload import WorkloadRef
from app.storage.event_hub import Following
from app.storage.events import Event, EventType
from app.storage.workloads import DeleteQueued

R = TypeVar("R")


@dataclass(frozen=True)
class RecordCodec(Generic[R]):
    """How one kind's records are read from and written to the engine's store."""

    kind: str
    """The engine's name of the kind (``WorkloadRef.kind``)."""
    noun: str
    """What a user calls one (``cluster``), for messages."""
    parse: Callable[[str], R]
    dump: Callable[[R], str]
    terminating: Callable[[R], R]
    """The record as a deletion begins."""

    def terminating_json(self, raw: str) -> str:
        return self.dump(self.terminating(self.parse(raw)))


class WorkloadService(Generic[R]):
    """The reads, deletion and events of one kind's workloads."""

    def __init__(self, engine: Engine, codec: RecordCodec[R], *, idle_seconds: float) -> None:
        self._engine = engine
        self._codec = codec
        self._idle_seconds = idle_seconds

    def require_complete(self) -> None:
        """503 ``rebuilding`` until Redis holds every workload again."""
        self._engine.workloads.require_complete()

    def find(self, ref: WorkloadRef, *, missing: str) -> R:
        """``ref``'s record; 404 with ``missing`` when there is none, 503 while a rebuild
        may not have restored it yet."""
        raw = self._engine.workloads.record(ref)
        if raw is None:
            self._engine.workloads.require_complete()
            raise NotFoundError(missing)
        return self._codec.parse(raw)

    def all(self) -> list[R]:
        """Every workload of the kind; never a partial list during a rebuild."""
        self._engine.workloads.require_complete()
        return [
            self._codec.parse(raw)
            for raw in self._engine.workloads.records(self._codec.kind).values()
        ]

    def owned_by(self, owner: str) -> list[R]:
        """``owner``'s workloads of the kind (named ``owner/...``), in name order."""
        self._engine.workloads.require_complete()
        prefix = f"{owner}/"
        records = self._engine.workloads.records(self._codec.kind)
        return [
            self._codec.parse(records[name]) for name in sorted(records) if name.startswith(prefix)
        ]

    def start_delete(
        self,
        ref: WorkloadRef,
        *,
        missing: str,
        first_events: list[tuple[EventType, str]],
        spec: dict[str, Any] | None = None,
    ) -> R:
        """Queue the deletion of ``ref``; its record as the deletion began (it may be gone
        by the time anyone reads it again). 404 with ``missing`` when there is none."""
        current = self._engine.workloads.record(ref)
        result = self._engine.queue_delete(
            ref,
            terminating=self._codec.terminating_json,
            first_events=first_events,
            spec=spec,
        )
        if result is DeleteQueued.MISSING or current is None:
            raise NotFoundError(missing)
        return self._codec.terminating(self._codec.parse(current))

    def follow_events(self, ref: WorkloadRef, *, after: str, missing: str) -> Following:
        """The events of ``ref``'s current (or last) operation after ``after``: a replay,
        then live events until the operation ends. 404 with ``missing`` when it has had
        no operation lately; 422 for a ``Last-Event-ID`` later than any event sent."""
        try:
            following = self._engine.follow(ref, after=after, idle_seconds=self._idle_seconds)
        except UnknownEventId:
            raise InvalidRequestError(
                f"Last-Event-ID is later than any event of this {self._codec.noun}'s operation",
                field="Last-Event-ID",
            ) from None
        if following is None:
            self._engine.workloads.require_complete()
            raise NotFoundError(missing)
        return following

    def await_end(self, ref: WorkloadRef, *, seconds: float) -> Event | None:
        """The terminal event of ``ref``'s current (or last) operation, waiting for it at
        most ``seconds``; None when it has not ended by then, or ``ref`` had none lately."""
        deadline = time.monotonic() + seconds
        following = self._engine.follow(ref, after="0-0", idle_seconds=self._idle_seconds)
        if following is None:
            return None
        try:
            for batch in following:
                for event in batch or ():
                    if event.terminal:
                        return event
                if time.monotonic() > deadline:
                    return None
        finally:
            following.close()
        return None

"""The engine's front door for services: queue an operation and hand it to the runner,
and follow an operation's events.

A service validates a request and decides what the workload will be; the engine records
the workload and queues its operation in one atomic step, then hands it to this process's
runner, which runs the kind's steps. That is the whole path of a request, in one direction.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from app.engine.kind import WorkloadKind
from app.engine.runner import HandOff, OperationRunner
from app.engine.workload import Action, Operation, WorkloadRef
from app.storage.event_hub import EventHub, Following
from app.storage.events import EventStore, EventType
from app.storage.workloads import DeleteQueued, SpawnQueued, WorkloadStore


class Engine:
    """Queues operations of the registered kinds and starts running them here."""

    def __init__(
        self,
        *,
        store: WorkloadStore,
        events: EventStore,
        hub: EventHub,
        kinds: Iterable[WorkloadKind],
        lease_seconds: float,
        scan_seconds: float,
        max_concurrent: int,
    ) -> None:
        self.store = store
        self.events = events
        self._hub = hub
        self.kinds = {kind.name: kind for kind in kinds}
        self.runner = OperationRunner(
            store=store,
            events=events,
            kinds=self.kinds,
            lease_seconds=lease_seconds,
            scan_seconds=scan_seconds,
            max_concurrent=max_concurrent,
        )

    def queue_spawn(
        self,
        ref: WorkloadRef,
        *,
        record: str,
        spec: dict[str, Any],
        secret: str | None,
        first_events: list[tuple[EventType, str]],
    ) -> SpawnQueued:
        """Record ``ref`` as ``record`` and start its spawn, unless it exists and has not
        failed. ``spec`` is what the kind's steps build from; ``secret`` is kept beside the
        operation only (a lab's token)."""
        operation = self._operation(ref, Action.SPAWN, spec)
        queued = self.store.queue_spawn(
            operation=operation,
            record=record,
            secret=secret,
            events=self.events.announcement(ref.key, first_events),
            lease=self.runner.lease_request(),
        )
        if queued.queued:
            # With the lease taken in the same step, this worker's runner starts from what
            # was just written, with no Redis round trip before its first Kubernetes call.
            handoff = HandOff(operation, secret) if queued.leased else None
            self.runner.submit(ref, handoff)
        return queued

    def queue_delete(
        self,
        ref: WorkloadRef,
        *,
        terminating: Callable[[str], str],
        first_events: list[tuple[EventType, str]],
    ) -> DeleteQueued:
        """Start deleting ``ref``, superseding a spawn under way: its record becomes
        ``terminating(record)``. Retried while another writer changes the record between
        the read and the write."""
        operation = self._operation(ref, Action.DELETE, None)
        announce = self.events.announcement(ref.key, first_events)
        while True:
            current = self.store.record(ref)
            if current is None:
                return DeleteQueued.MISSING
            result = self.store.queue_delete(
                operation=operation,
                expect=current,
                record=terminating(current),
                events=announce,
            )
            if result is not DeleteQueued.CHANGED:
                break
        if result is DeleteQueued.QUEUED:
            self.runner.submit(ref)
        return result

    def follow(self, ref: WorkloadRef, *, after: str, idle_seconds: float) -> Following | None:
        """Follow the events of ``ref``'s current (or last) operation from after ``after``:
        the replay, then live events until a terminal one. None when it has none."""
        following = self._hub.follow(ref.key, after, idle_seconds)
        # A replay with events proves the stream exists; only an empty one needs asking.
        if not following.replayed and not self.events.exists(ref.key):
            following.close()
            return None
        return following

    def _operation(
        self, ref: WorkloadRef, action: Action, spec: dict[str, Any] | None
    ) -> Operation:
        now = time.time()
        return Operation(
            id=uuid.uuid4().hex,
            ref=ref,
            action=action,
            started=now,
            deadline=now + self.kinds[ref.kind].timeout(action),
            spec=spec,
        )

    def start(self) -> None:
        self.runner.start()

    def stop(self) -> None:
        self.runner.stop()

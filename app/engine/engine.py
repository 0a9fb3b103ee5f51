"""The engine's front door for services: queue an operation and hand it to a runner,
and follow an operation's events.

A service validates a request and decides what the workload will be; the engine records
the workload and queues its operation in one atomic step, then hands it on
(``app.engine.dispatch``): to this process's runner, which runs the kind's steps, or, in a
web process, to the runner processes by notice. That is the whole path of a request, in one
direction. A creation of an admitted kind, queued with its group, may instead wait for a
place in that same step (``app.engine.admission``); whichever process admits it hands it on.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from app.engine.admission import Admission
from app.engine.dispatch import OperationDispatch, RunnerNotices
from app.engine.kind import WorkloadKind
from app.engine.reads import WorkloadReads
from app.engine.runner import OperationRunner
from app.errors import MaintenanceError
from app.log import current_request_id
from app.models.workload import Action, Operation, WorkloadRef
from app.storage.event_hub import EventHub, Following
from app.storage.events import TERMINAL, EventStore, EventType, entry_order
from app.storage.maintenance import MaintenanceStore
from app.storage.operation_notices import OperationNotices
from app.storage.workloads import DeleteQueued, SpawnQueued, WorkloadStore


class UnknownEventId(ValueError):
    """A client resumes after an event id later than any its workload's stream holds."""


class Engine:
    """Queues operations of the registered kinds and has them run: here, or in the runner
    processes once ``start`` says this process runs none."""

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
        notices: OperationNotices,
        admission: Admission | None = None,
        maintenance: MaintenanceStore | None = None,
    ) -> None:
        self.store = store
        self.workloads = WorkloadReads(store)
        """What services and kinds' stores read of the records (the store stays the engine's)."""
        self.maintenance = maintenance
        self.events = events
        self._hub = hub
        self.kinds = {kind.name: kind for kind in kinds}
        self.admission = admission
        self.runner = OperationRunner(
            store=store,
            events=events,
            kinds=self.kinds,
            lease_seconds=lease_seconds,
            scan_seconds=scan_seconds,
            max_concurrent=max_concurrent,
            admission=admission,
            notices_channel=notices.channel,
        )
        self._remote = RunnerNotices(notices, admission)
        self._dispatch: OperationDispatch = self.runner
        """This process's runner until ``start`` says it runs no operations."""

    def queue_spawn(
        self,
        ref: WorkloadRef,
        *,
        record: str,
        spec: dict[str, Any],
        secret: str | None,
        first_events: list[tuple[EventType, str]],
        expect: str | None = None,
        group: str | None = None,
    ) -> SpawnQueued:
        """Record ``ref`` as ``record`` and start its spawn, unless it exists and has not
        failed. ``spec`` is what the kind's steps build from; ``secret`` is kept beside the
        operation only (a lab's token); ``first_events`` start the workload's new event
        stream, in the same step (what the run does next, its steps announce). With
        ``expect``, the workload exists as that record and is updated: ``record`` replaces
        it and the spawn brings the workload to it (see ``WorkloadStore.queue_spawn``).

        With ``group``, a creation of an admitted kind counts against the group's rate (429
        past it) and, while admission is on, takes a place or waits in the queue for one
        (``SpawnQueued.position``; 503 ``queue_full`` when the queue is full). Without, it
        starts at once: what frees resources (an app stopping) never waits.

        While maintenance mode is on, such creations (with ``group``, of an admitted kind)
        are refused with 503 ``maintenance``; the platform's own work goes on."""
        operation = self._operation(ref, Action.SPAWN, spec)
        admission = None
        if group is not None and self.kinds[ref.kind].admitted:
            self._refuse_during_maintenance()
            if self.admission is not None:
                self.admission.count(group)
                admission = self.admission.request(group)
        queued = self.store.queue_spawn(
            operation=operation,
            record=record,
            secret=secret,
            events=self.events.announcement(ref.key, first_events),
            expect=expect,
            admission=admission,
        )
        if queued.queue_full and self.admission is not None:
            raise self.admission.queue_full()
        # One waiting for a place is not run until it is admitted.
        if queued.queued and not queued.position:
            self._dispatch.submit(ref)
        return queued

    def _refuse_during_maintenance(self) -> None:
        current = self.maintenance.current() if self.maintenance is not None else None
        if current is not None:
            raise MaintenanceError(f"the platform is under maintenance: {current.message}")

    def queue_delete(
        self,
        ref: WorkloadRef,
        *,
        terminating: Callable[[str], str],
        first_events: list[tuple[EventType, str]],
        spec: dict[str, Any] | None = None,
        failed_only: bool = False,
    ) -> DeleteQueued:
        """Start deleting ``ref``, superseding a spawn under way: its record becomes
        ``terminating(record)``; ``spec`` is what the kind's delete steps need beyond the
        record (a kernel's grace period). Retried while another writer changes the record
        between the read and the write. ``failed_only``: only a failed workload nobody is
        spawning again (else ``NOT_FAILED``), for sweeps that must not cancel a new spawn."""
        operation = self._operation(ref, Action.DELETE, spec)
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
                failed_only=failed_only,
            )
            if result is not DeleteQueued.CHANGED:
                break
        if result is DeleteQueued.QUEUED:
            self._dispatch.submit(ref)
            admission = self.admission
            if admission is not None and admission.enabled and self.kinds[ref.kind].admitted:
                # A spawn it superseded gave its place back, or waits no more.
                self._dispatch.admit(withdraw=ref)
        return result

    def end(self, ref: WorkloadRef, *, reason: str) -> None:
        """Delete what is left of a workload that ended by itself (``WorkloadTracking.ended``
        said why): the elected watcher and the reconcile call this, as a user's delete
        would be queued."""
        tracking = self.kinds[ref.kind].tracking
        if tracking is None:
            return
        self.queue_delete(ref, terminating=tracking.ending, first_events=[(EventType.INFO, reason)])

    def follow(self, ref: WorkloadRef, *, after: str, idle_seconds: float) -> Following | None:
        """Follow the events of ``ref``'s current (or last) operation from after ``after``:
        the replay, then live events until a terminal one. None when it has none; an
        ended stream when the client already has its terminal event; ``UnknownEventId``
        when ``after`` is later than any event of it (no such id was ever sent)."""
        following = self._hub.follow(ref.key, after, idle_seconds)
        # A replay with events proves the stream exists; only an empty one needs asking.
        if following.replayed:
            return following
        last = self.events.last(ref.key)
        if last is None:
            following.close()
            return None
        seen = entry_order(last.id) <= entry_order(after)
        if not seen:
            return following  # Appended since the replay: the stream has it already.
        if last.type in TERMINAL:
            following.close()
            return Following.ended()
        if entry_order(last.id) < entry_order(after):
            following.close()
            raise UnknownEventId(after)
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
            request_id=current_request_id(),
        )

    def start(self, *, runs_operations: bool = True) -> None:
        """Start the runner's scanner, or, in a process that runs no operations (the web
        role), hand every queued operation to the runner processes from now on."""
        if runs_operations:
            self.runner.start()
        else:
            self._dispatch = self._remote

    def stop(self) -> None:
        self.runner.stop()

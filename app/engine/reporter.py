"""The one way an operation's steps tell the world how it goes: its events.

Every write first checks, in the same Redis script, that the operation is still its
workload's current one: a spawn superseded by a delete must not write into the delete's
fresh event stream. Writes past the operation's deadline are refused too, so steps that
report regularly also stop on time; and once the worker is stopping, checks and writes end
the run (``HandedOver``), so that another worker resumes the operation at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from app.models.workload import Operation, WorkloadRef
from app.storage.events import EventStore, EventType
from app.storage.workloads import WorkloadStore


class Superseded(Exception):
    """Another operation replaced this one; stop quietly."""


class DeadlineExceeded(Exception):
    """The operation ran out of time."""


class HandedOver(Exception):
    """This worker is stopping: leave the operation, unfinished, to another worker, which
    runs its idempotent steps again."""


class Reporter:
    """Event writer and guard for one operation."""

    def __init__(
        self,
        operation: Operation,
        *,
        store: WorkloadStore,
        events: EventStore,
        stopping: threading.Event | None = None,
    ) -> None:
        """``stopping``: set when this worker stops taking work."""
        self.operation = operation
        self._store = store
        self._events = events
        self._progress = 0
        self._stopping = stopping
        self._at_end: list[tuple[EventType, str]] = []

    @property
    def ref(self) -> WorkloadRef:
        return self.operation.ref

    def remaining(self) -> float:
        """Seconds left before the operation's deadline."""
        return self.operation.deadline - time.time()

    def check(self) -> None:
        """Raise if the operation was superseded or is past its deadline, or if this
        worker is stopping."""
        self._check_stopping()
        current = self._store.operation(self.ref)
        if current is None or current.id != self.operation.id:
            raise Superseded
        if self.remaining() <= 0:
            raise DeadlineExceeded

    def info(self, message: str, *, progress: int | Sequence[int] = ()) -> None:
        """An info event, and after it a progress event for each of ``progress`` that moves
        the bar forward, in one write."""
        events = [(EventType.INFO, message)]
        for percent in (progress,) if isinstance(progress, int) else progress:
            if percent > self._progress:
                self._progress = percent
                events.append((EventType.PROGRESS, str(percent)))
        self._write(events)

    def error(self, message: str) -> None:
        """A problem the operation works around; a failure ends it through the runner."""
        self._write([(EventType.ERROR, message)])

    def write(self, events: Sequence[tuple[EventType, str]]) -> None:
        """Several events in one write; a progress event that would not move the bar
        forward is left out."""
        self._write(self._forward(events))

    def at_end(self, events: Sequence[tuple[EventType, str]]) -> None:
        """Events written with the operation's successful end, in the step that keeps its
        final record, rather than in a write of their own: what a step says last ("the
        lab is running") costs no round trip. A failure drops them; its error says why."""
        self._at_end.extend(self._forward(events))

    def closing(self, message: str) -> None:
        """An info event written with the operation's successful end (``at_end``)."""
        self.at_end([(EventType.INFO, message)])

    def ending_events(self) -> list[tuple[EventType, str]]:
        """What ``at_end`` kept, in order, for the runner to write with the end."""
        return list(self._at_end)

    def _forward(self, events: Sequence[tuple[EventType, str]]) -> list[tuple[EventType, str]]:
        """``events`` without progress that would not move the bar forward."""
        kept = []
        for type_, data in events:
            if type_ is EventType.PROGRESS:
                if int(data) <= self._progress:
                    continue
                self._progress = int(data)
            kept.append((type_, data))
        return kept

    def progress(self, percent: int) -> None:
        """Move the progress bar forward; it never goes back."""
        if percent > self._progress:
            self._progress = percent
            self._write([(EventType.PROGRESS, str(percent))])

    def _check_stopping(self) -> None:
        if self._stopping is not None and self._stopping.is_set():
            raise HandedOver

    def _write(self, events: list[tuple[EventType, str]]) -> None:
        self._check_stopping()
        if self.remaining() <= 0:
            raise DeadlineExceeded
        written = self._events.append_if_current(
            self.ref.key,
            events,
            self._store.operation_key(self.ref),
            self.operation.id,
        )
        if written is None:
            raise Superseded

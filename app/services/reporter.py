"""Writes an operation's events, and only while that operation is still the current one.

A spawn superseded by a delete must not write into the delete's fresh event stream, so
every write first checks that the operation still owns the user.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from app.models.lab import Operation
from app.services.context import LabContext
from app.storage.events import EventType


class Superseded(Exception):
    """Another operation replaced this one; stop quietly."""


class DeadlineExceeded(Exception):
    """The operation ran out of time."""


class Reporter:
    """Event writer and guard for one operation."""

    def __init__(self, ctx: LabContext, operation: Operation) -> None:
        self._ctx = ctx
        self.operation = operation
        self._progress = 0

    @property
    def username(self) -> str:
        return self.operation.username

    def remaining(self) -> float:
        return self.operation.deadline - time.time()

    def check(self) -> None:
        """Raise if the operation was superseded or is past its deadline."""
        if not self._ctx.labs.is_current(self.operation):
            raise Superseded
        if self.remaining() <= 0:
            raise DeadlineExceeded

    def _write(self, *events: tuple[EventType, str]) -> None:
        if self.remaining() <= 0:
            raise DeadlineExceeded
        written = self._ctx.events.append_if_current(
            self.username,
            list(events),
            self._ctx.labs.operation_key(self.username),
            self.operation.id,
        )
        if written is None:
            raise Superseded

    def info(self, message: str, *, progress: int | Sequence[int] = ()) -> None:
        """An info event, and after it a progress event for each of ``progress`` that moves
        the bar forward, in one write."""
        events = [(EventType.INFO, message)]
        for percent in (progress,) if isinstance(progress, int) else progress:
            if percent > self._progress:
                self._progress = percent
                events.append((EventType.PROGRESS, str(percent)))
        self._write(*events)

    def error(self, message: str) -> None:
        self._write((EventType.ERROR, message))

    def progress(self, percent: int) -> None:
        """Move the progress bar forward; it never goes back."""
        if percent > self._progress:
            self._progress = percent
            self._write((EventType.PROGRESS, str(percent)))

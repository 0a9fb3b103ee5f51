"""Writes an operation's events, and only while that operation is still the current one.

A spawn superseded by a delete must not write into the delete's fresh event stream, so
every write first checks that the operation still owns the user.
"""

from __future__ import annotations

import time

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

    def _write(self, type_: EventType, data: str) -> None:
        if self.remaining() <= 0:
            raise DeadlineExceeded
        written = self._ctx.events.append_if_current(
            self.username,
            type_,
            data,
            self._ctx.labs.operation_key(self.username),
            self.operation.id,
        )
        if written is None:
            raise Superseded

    def info(self, message: str) -> None:
        self._write(EventType.INFO, message)

    def error(self, message: str) -> None:
        self._write(EventType.ERROR, message)

    def progress(self, percent: int) -> None:
        """Move the progress bar forward; it never goes back."""
        if percent > self._progress:
            self._progress = percent
            self._write(EventType.PROGRESS, str(percent))

    def complete(self) -> None:
        self._ctx.events.append(self.username, EventType.PROGRESS, "100")
        self._ctx.events.append(self.username, EventType.COMPLETE, "")

    def failed(self, message: str) -> None:
        self._ctx.events.append(self.username, EventType.ERROR, message)
        self._ctx.events.append(self.username, EventType.FAILED, message)

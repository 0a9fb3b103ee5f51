"""Service events turned into JupyterHub progress events, shared with any number of waiters.

The conversion is DMTN-222's: a ``progress`` event only moves the remembered percentage; an
``info`` or ``error`` event is shown with the last percentage; ``complete`` and ``failed`` end
the operation at 100. ``start`` and ``stop`` feed the tracker; every ``progress()`` generator
JupyterHub opens (one per browser tab watching the spawn page) replays what was recorded and
then waits on one condition for more, so a late watcher misses nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from labspawner.events import COMPLETE, ERROR, FAILED, INFO, PROGRESS, LabEvent

HubEvent = dict[str, Any]


class ProgressTracker:
    """The JupyterHub progress events of the current start or stop of one server."""

    def __init__(self) -> None:
        self.events: list[HubEvent] = []
        self.progress = 0
        self.complete = False
        self.failed = False
        self.message: str | None = None
        self._condition: asyncio.Condition | None = None

    # Pure conversion --------------------------------------------------------------------

    def convert(self, event: LabEvent) -> HubEvent | None:
        """Update the state for ``event``; the JupyterHub event to emit, if any."""
        if event.type == PROGRESS:
            percent = event.percent
            if percent is not None:
                self.progress = max(self.progress, min(percent, 100))
            return None
        if event.type in (INFO, ERROR):
            hub_event: HubEvent = {"progress": self.progress, "message": event.data}
            if event.type == ERROR:
                hub_event["message"] = f"Error: {event.data}"
            return hub_event
        if event.type == COMPLETE:
            self.progress = 100
            self.complete = True
            return {"progress": 100, "message": event.data or "Lab operation complete"}
        if event.type == FAILED:
            self.progress = 100
            self.complete = True
            self.failed = True
            self.message = event.data
            return {"progress": 100, "message": f"Lab failed: {event.data}", "failed": True}
        return None

    # Shared with waiters --------------------------------------------------------------

    @property
    def condition(self) -> asyncio.Condition:
        # Created on first use, inside the running loop that JupyterHub owns.
        if self._condition is None:
            self._condition = asyncio.Condition()
        return self._condition

    async def reset(self) -> None:
        """Forget the previous operation (a new start or stop begins)."""
        async with self.condition:
            self.events = []
            self.progress = 0
            self.complete = False
            self.failed = False
            self.message = None
            self.condition.notify_all()

    async def record(self, event: LabEvent) -> None:
        """Take one service event; wake the waiters if it produced a JupyterHub event."""
        async with self.condition:
            hub_event = self.convert(event)
            if hub_event is not None:
                self.events.append(hub_event)
                self.condition.notify_all()

    async def finish(self, message: str, *, failed: bool) -> None:
        """End the operation without a final service event (for example a start that
        could not even be requested), so that no waiter waits forever."""
        async with self.condition:
            if self.complete:
                return
            self.complete = True
            self.failed = failed
            self.progress = 100
            self.message = message
            event: HubEvent = {"progress": 100, "message": message}
            if failed:
                event["failed"] = True
            self.events.append(event)
            self.condition.notify_all()

    async def follow(self) -> AsyncIterator[HubEvent]:
        """Every event so far, then each new one, until the operation is complete."""
        index = 0
        while True:
            async with self.condition:
                while index >= len(self.events) and not self.complete:
                    await self.condition.wait()
                batch = self.events[index:]
                index = len(self.events)
                done = self.complete
            for event in batch:
                yield event
            if done:
                return

    # Persistence (JupyterHub's spawner state) -----------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "events": list(self.events),
            "progress": self.progress,
            "complete": self.complete,
            "failed": self.failed,
        }

    def load(self, state: dict[str, Any]) -> None:
        self.events = list(state.get("events") or [])
        self.progress = int(state.get("progress") or 0)
        self.complete = bool(state.get("complete", True))
        self.failed = bool(state.get("failed", False))

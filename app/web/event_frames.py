"""A lab's events as server-sent event frames, in the manners of the API that created the lab.

The events are stored once, in DMTN-222's terms (``app.storage.events``): ``progress`` carries a
percentage, ``info`` and ``error`` a message, ``complete`` nothing, ``failed`` the reason. A lab
created through DMTN-222's ``/spawn`` is streamed that way. One created through nublado's
``/create`` is streamed as nublado's controller streams, because that is what its JupyterHub
spawner parses: every ``data`` is JSON ``{"message": ..., "progress": ...}`` (the percentage an
integer from 1 to 100, left out until there is one), and there are no ``progress`` events; the
percentage rides on the next message instead. The spawner turns any other ``data`` into a bare
message and would fail on a ``progress`` event without one.
"""

from __future__ import annotations

import json
from typing import Protocol

from app.storage.events import Event, EventType

COMPLETE_MESSAGE = "Done"
"""nublado's ``complete`` carries a message; DMTN-222's has none to give."""


class Frames(Protocol):
    """How one stream writes its events and its keepalives."""

    keepalive: bytes

    def frame(self, event: Event) -> bytes:
        """The event's frame (empty when it has none of its own)."""


class DmtnFrames:
    """DMTN-222's frames: the stored data as it is (one ``data:`` line per line of it), and a
    comment line to keep the connection alive."""

    keepalive = b": keepalive\n\n"

    @staticmethod
    def frame(event: Event) -> bytes:
        if "\n" in event.data:
            data = "\n".join(f"data: {line}" for line in event.data.split("\n"))
        else:
            data = f"data: {event.data}"
        return f"id: {event.id}\nevent: {event.type.value}\n{data}\n\n".encode()


class NubladoFrames:
    """nublado's frames for one stream: remembers the progress bar between events.

    Its keepalive is a ``ping`` event, as the server nublado's controller runs on sends and
    its spawner skips. Not a comment: the SSE parser that spawner uses (httpx-sse) turns a
    comment's blank line after an event with an id into an empty ``message`` event, which
    the spawner would show as a message of its own."""

    keepalive = b"event: ping\ndata: \n\n"

    def __init__(self, progress: int = 0) -> None:
        self.progress = progress
        """Where the bar stands: the latest ``progress`` event's percentage."""

    def see(self, event: Event) -> None:
        """Take in an event the client has already seen (a resumed stream's earlier ones)."""
        if event.type is EventType.PROGRESS:
            self.progress = percentage(event.data, self.progress)

    def frame(self, event: Event) -> bytes:
        """The event's frame; empty for a ``progress`` event, whose value goes with the next."""
        if event.type is EventType.PROGRESS:
            self.see(event)
            return b""
        message = event.data or (COMPLETE_MESSAGE if event.type is EventType.COMPLETE else "")
        data: dict[str, str | int] = {"message": message}
        if self.progress > 0:
            data["progress"] = self.progress
        return f"id: {event.id}\nevent: {event.type.value}\ndata: {json.dumps(data)}\n\n".encode()


def percentage(data: str, default: int) -> int:
    """A ``progress`` event's data as nublado's bar takes it: an integer from 1 to 100."""
    try:
        value = round(float(data))
    except (ValueError, OverflowError):
        return default
    return max(1, min(100, value))

"""An incremental server-sent events parser: feed it bytes, get complete events back."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SseEvent:
    id: str | None
    type: str
    data: str


class SseParser:
    """Accumulates a stream's bytes and yields each event once its blank line arrives.

    Comment blocks (keepalives) are counted, not returned.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self.comments = 0

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buffer += chunk
        events: list[SseEvent] = []
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                return events
            block = self._buffer[:end].decode("utf-8", errors="replace")
            self._buffer = self._buffer[end + 2 :]
            event = _parse_block(block)
            if event is None:
                self.comments += 1
            else:
                events.append(event)


def _parse_block(block: str) -> SseEvent | None:
    event_id: str | None = None
    kind = "message"
    data: list[str] = []
    seen = False
    for line in block.split("\n"):
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            event_id = value
        elif name == "event":
            kind, seen = value, True
        elif name == "data":
            data.append(value)
            seen = True
    if not seen:
        return None
    return SseEvent(event_id, kind, "\n".join(data))

"""Read server-sent events from a Flask test client or a ``requests`` response."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SseEvent:
    id: str | None
    type: str
    data: str


def parse_sse(chunks: Iterable[bytes | str]) -> Iterator[SseEvent | str]:
    """Yield events, and comment lines (keepalives) as plain strings."""
    buffer = ""
    for chunk in chunks:
        buffer += chunk.decode() if isinstance(chunk, bytes) else chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            fields: dict[str, list[str]] = {}
            comments = []
            for line in block.split("\n"):
                if line.startswith(":"):
                    comments.append(line[1:].strip())
                    continue
                name, _, value = line.partition(":")
                fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
            if "event" in fields or "data" in fields:
                yield SseEvent(
                    id=fields.get("id", [None])[0],
                    type=fields.get("event", ["message"])[0],
                    data="\n".join(fields.get("data", [])),
                )
            else:
                yield from comments

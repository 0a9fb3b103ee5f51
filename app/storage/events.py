"""Per-user event streams in Redis Streams.

One stream per user holds the events of the current operation. Entry IDs serve as the
server-sent events' ``id`` so a client resumes with ``Last-Event-ID``; any worker of any
replica serves any stream, and a late subscriber replays from the operation's start.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import cast

import redis
from redis.client import Pipeline

TERMINAL_TTL_SECONDS = 24 * 3600
"""How long a finished operation's events stay readable after it ends."""


class EventType(StrEnum):
    INFO = "info"
    PROGRESS = "progress"
    ERROR = "error"
    COMPLETE = "complete"
    FAILED = "failed"


TERMINAL = frozenset({EventType.COMPLETE, EventType.FAILED})


@dataclass(frozen=True)
class Event:
    id: str
    type: EventType
    data: str

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL


_APPEND_IF_CURRENT = """
local raw = redis.call('GET', KEYS[2])
if not raw or cjson.decode(raw)['id'] ~= ARGV[1] then
  return false
end
local id = redis.call('XADD', KEYS[1], '*', 'type', ARGV[2], 'data', ARGV[3])
redis.call('PERSIST', KEYS[1])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return id
"""


class EventStore:
    """Append, replay and tail a user's events."""

    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._redis = client
        self._append_if_current = client.register_script(_APPEND_IF_CURRENT)
        self._prefix = f"{key_prefix}events:"
        self.channel = f"{key_prefix}events-changed"
        """Pub/sub channel carrying the username whose events changed."""

    def key(self, username: str) -> str:
        return f"{self._prefix}{username}"

    def append(self, username: str, type_: EventType, data: str) -> str:
        """Add an event; a terminal one also starts the stream's expiry clock."""
        key = self.key(username)
        pipe = self._redis.pipeline(transaction=True)
        pipe.xadd(key, {"type": type_.value, "data": data})
        if type_ in TERMINAL:
            pipe.expire(key, TERMINAL_TTL_SECONDS)
        else:
            pipe.persist(key)
        pipe.publish(self.channel, username)
        entry_id, *_ = pipe.execute()
        return str(entry_id)

    def append_if_current(
        self,
        username: str,
        type_: EventType,
        data: str,
        operation_key: str,
        operation_id: str,
    ) -> str | None:
        """Add a non-terminal event only while ``operation_id`` is the user's operation.

        One round trip: the check and the append happen atomically in Redis, so an
        operation that was just superseded can never write into its successor's stream.
        Returns None when the operation is no longer current.
        """
        entry_id = self._append_if_current(
            keys=[self.key(username), operation_key],
            args=[operation_id, type_.value, data, self.channel, username],
        )
        return str(entry_id) if entry_id else None

    def restart(self, pipe: Pipeline, username: str, first_message: str) -> None:
        """Queue on ``pipe``: drop the previous operation's events and start a new stream."""
        key = self.key(username)
        pipe.delete(key)
        pipe.xadd(key, {"type": EventType.INFO.value, "data": first_message})
        pipe.publish(self.channel, username)

    def exists(self, username: str) -> bool:
        return bool(self._redis.exists(self.key(username)))

    def read(self, username: str, after: str = "0-0") -> list[Event]:
        """Every event after ``after`` (all of them by default)."""
        start = f"({after}" if after != "0-0" else "-"
        entries = cast(
            list[tuple[str, dict[str, str]]], self._redis.xrange(self.key(username), min=start)
        )
        return [_event(entry_id, fields) for entry_id, fields in entries]


def _event(entry_id: str, fields: dict[str, str]) -> Event:
    return Event(id=entry_id, type=EventType(fields["type"]), data=fields.get("data", ""))

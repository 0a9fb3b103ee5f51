"""Per-user event streams in Redis Streams.

One stream per user holds the events of the current operation. Entry IDs serve as the
server-sent events' ``id`` so a client resumes with ``Last-Event-ID``; any worker of any
replica serves any stream, and a late subscriber replays from the operation's start.

Every append is a Lua script that adds the entry and publishes it, whole, on one channel,
in the same atomic step: subscribers (``EventHub``) get each event in stream order without
reading the stream, and the stream stays the record for replays.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

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

    @property
    def order(self) -> tuple[int, int]:
        """The entry id as numbers, for comparing positions in the stream."""
        return entry_order(self.id)


def entry_order(entry_id: str) -> tuple[int, int]:
    millis, _, sequence = entry_id.partition("-")
    return int(millis), int(sequence or 0)


# KEYS: stream. ARGV: type, data, channel, username, expire-seconds (0: persist).
_ADD_AND_PUBLISH = """
local function add(key, kind, data, channel, user, ttl)
  local id = redis.call('XADD', key, '*', 'type', kind, 'data', data)
  if tonumber(ttl) > 0 then
    redis.call('EXPIRE', key, ttl)
  else
    redis.call('PERSIST', key)
  end
  redis.call('PUBLISH', channel, cjson.encode({u = user, i = id, t = kind, d = data}))
  return id
end
"""

_APPEND = (
    _ADD_AND_PUBLISH
    + """
return add(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
"""
)

# KEYS: stream, operation record. ARGV: operation id, then as _APPEND.
_APPEND_IF_CURRENT = (
    _ADD_AND_PUBLISH
    + """
local raw = redis.call('GET', KEYS[2])
if not raw or cjson.decode(raw)['id'] ~= ARGV[1] then
  return false
end
return add(KEYS[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
"""
)

# KEYS: stream. ARGV: as _APPEND; the stream is emptied first.
_RESTART = (
    _ADD_AND_PUBLISH
    + """
redis.call('DEL', KEYS[1])
return add(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
"""
)


class EventStore:
    """Append and replay a user's events."""

    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._redis = client
        self._append = client.register_script(_APPEND)
        self._append_if_current = client.register_script(_APPEND_IF_CURRENT)
        self._restart = client.register_script(_RESTART)
        self._prefix = f"{key_prefix}events:"
        self.channel = f"{key_prefix}events-published"
        """Pub/sub channel carrying every appended event as JSON (see ``parse_message``)."""

    def key(self, username: str) -> str:
        return f"{self._prefix}{username}"

    def _args(self, username: str, type_: EventType, data: str) -> list[str | int]:
        ttl = TERMINAL_TTL_SECONDS if type_ in TERMINAL else 0
        return [type_.value, data, self.channel, username, ttl]

    def append(
        self, username: str, type_: EventType, data: str, pipe: Pipeline | None = None
    ) -> str:
        """Add an event; a terminal one also starts the stream's expiry clock.

        With ``pipe`` the append is only queued there (and the id is not known yet).
        """
        entry_id = self._append(
            keys=[self.key(username)], args=self._args(username, type_, data), client=pipe
        )
        return "" if pipe is not None else str(entry_id)

    def append_if_current(
        self,
        username: str,
        type_: EventType,
        data: str,
        operation_key: str,
        operation_id: str,
    ) -> str | None:
        """Add an event only while ``operation_id`` is the user's operation.

        One round trip: the check and the append happen atomically in Redis, so an
        operation that was just superseded can never write into its successor's stream.
        Returns None when the operation is no longer current.
        """
        entry_id = self._append_if_current(
            keys=[self.key(username), operation_key],
            args=[operation_id, *self._args(username, type_, data)],
        )
        return str(entry_id) if entry_id else None

    def restart(self, pipe: Pipeline, username: str, first_message: str) -> None:
        """Queue on ``pipe``: drop the previous operation's events and start a new stream."""
        self._restart(
            keys=[self.key(username)],
            args=self._args(username, EventType.INFO, first_message),
            client=pipe,
        )

    def exists(self, username: str) -> bool:
        return bool(self._redis.exists(self.key(username)))

    def read(self, username: str, after: str = "0-0") -> list[Event]:
        """Every event after ``after`` (all of them by default)."""
        start = f"({after}" if after != "0-0" else "-"
        entries = cast(
            list[tuple[str, dict[str, str]]], self._redis.xrange(self.key(username), min=start)
        )
        return [_event(entry_id, fields) for entry_id, fields in entries]


def parse_message(raw: Any) -> tuple[str, Event | None]:
    """A published message as (username, event); the event is None if unreadable."""
    try:
        message = json.loads(raw)
        event = Event(id=str(message["i"]), type=EventType(message["t"]), data=str(message["d"]))
        return str(message["u"]), event
    except (ValueError, KeyError, TypeError):
        return "", None


def _event(entry_id: str, fields: dict[str, str]) -> Event:
    return Event(id=entry_id, type=EventType(fields["type"]), data=fields.get("data", ""))

"""Per-user event streams in Redis Streams.

One stream per user holds the events of the current operation. Entry IDs serve as the
server-sent events' ``id`` so a client resumes with ``Last-Event-ID``; any worker of any
replica serves any stream, and a late subscriber replays from the operation's start.

Every append is a Lua script that adds the entry and publishes it, whole, on one channel,
in the same atomic step: subscribers (``EventHub``) get each event in stream order without
reading the stream, and the stream stays the record for replays.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple, cast

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


_TYPES = {kind.value: kind for kind in EventType}


class Event(NamedTuple):
    """One event. A tuple rather than a dataclass: a broadcast makes thousands at once."""

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


# The message is "user\nid\ntype\ndata": none of the first three can hold a newline, and
# splitting it is cheaper on both sides than JSON (see ``parse_message``). Each script
# takes ARGV channel, username, then (type, data, expire-seconds or 0) per event, from
# ``first`` to ``last`` (the end of ARGV by default); it returns the last entry's id.
ADD_AND_PUBLISH = """
local function add_all(key, first, last)
  local channel, user, id = ARGV[first], ARGV[first + 1], false
  for i = first + 2, last or #ARGV, 3 do
    local kind, data, ttl = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
    id = redis.call('XADD', key, '*', 'type', kind, 'data', data)
    if ttl > 0 then
      redis.call('EXPIRE', key, ttl)
    end
    redis.call('PUBLISH', channel, user .. '\\n' .. id .. '\\n' .. kind .. '\\n' .. data)
  end
  return id
end
"""

# KEYS: stream.
_APPEND = ADD_AND_PUBLISH + "return add_all(KEYS[1], 1)\n"

# KEYS: stream, operation record. ARGV: operation id first; false if it is not current.
_APPEND_IF_CURRENT = (
    ADD_AND_PUBLISH
    + """
local raw = redis.call('GET', KEYS[2])
if not raw or cjson.decode(raw)['id'] ~= ARGV[1] then
  return false
end
return add_all(KEYS[1], 2)
"""
)

# KEYS: stream, emptied first.
_RESTART = ADD_AND_PUBLISH + "redis.call('DEL', KEYS[1])\nreturn add_all(KEYS[1], 1)\n"


class Announcement(NamedTuple):
    """Events for a script that includes ``ADD_AND_PUBLISH``: the stream and ``add_all``'s
    arguments."""

    stream: str
    args: list[str | int]


class EventStore:
    """Append and replay a user's events.

    The restart inside the start-of-operation transactions goes as EVAL with its text:
    redis-py checks that a script object's SHA is loaded (one more round trip) before every
    pipeline holding one, and an EVALSHA refused inside MULTI would leave the rest of the
    transaction applied. A long pipeline of appends keeps EVALSHA (one check, short
    commands).
    """

    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._redis = client
        self._append = client.register_script(_APPEND)
        self._append_if_current = client.register_script(_APPEND_IF_CURRENT)
        self._prefix = f"{key_prefix}events:"
        self.channel = f"{key_prefix}events-published"
        """Pub/sub channel carrying every appended event (see ``parse_message``)."""

    def key(self, username: str) -> str:
        return f"{self._prefix}{username}"

    def announcement(self, username: str, events: list[tuple[EventType, str]]) -> Announcement:
        """``events`` in the form another script appends them with ``ADD_AND_PUBLISH``
        (for a state change and its events in one atomic step)."""
        return Announcement(self.key(username), self._args(username, events))

    def _args(self, username: str, events: list[tuple[EventType, str]]) -> list[str | int]:
        args: list[str | int] = [self.channel, username]
        for type_, data in events:
            args += [type_.value, data, TERMINAL_TTL_SECONDS if type_ in TERMINAL else 0]
        return args

    def append(
        self, username: str, type_: EventType, data: str, pipe: Pipeline | None = None
    ) -> str:
        """Add an event; a terminal one also starts the stream's expiry clock.

        With ``pipe`` the append is only queued there (and the id is not known yet).
        """
        entry_id = self._append(
            keys=[self.key(username)], args=self._args(username, [(type_, data)]), client=pipe
        )
        return "" if pipe is not None else str(entry_id)

    def append_if_current(
        self,
        username: str,
        events: list[tuple[EventType, str]],
        operation_key: str,
        operation_id: str,
    ) -> str | None:
        """Add events only while ``operation_id`` is the user's operation.

        One round trip: the check and the append happen atomically in Redis, so an
        operation that was just superseded can never write into its successor's stream.
        Returns the last event's id, or None when the operation is no longer current.
        """
        entry_id = self._append_if_current(
            keys=[self.key(username), operation_key],
            args=[operation_id, *self._args(username, events)],
        )
        return str(entry_id) if entry_id else None

    def restart(self, pipe: Pipeline, username: str, first_message: str) -> None:
        """Queue on ``pipe``: drop the previous operation's events and start a new stream."""
        args = self._args(username, [(EventType.INFO, first_message)])
        pipe.eval(_RESTART, 1, self.key(username), *args)

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
        username, entry_id, kind, data = raw.split("\n", 3)
        return username, Event(entry_id, _TYPES[kind], data)
    except (AttributeError, ValueError, KeyError):
        return "", None


def _event(entry_id: str, fields: dict[str, str]) -> Event:
    return Event(entry_id, _TYPES[fields["type"]], fields.get("data", ""))

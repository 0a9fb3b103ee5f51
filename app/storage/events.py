"""Per-workload event streams in Redis Streams.

One stream per workload holds the events of its current operation, each entry with the
id of the request behind it (a field ``request``, absent for events of background work).
Entry IDs serve as the server-sent events' ``id`` so a client resumes with
``Last-Event-ID``; any worker of any replica serves any stream, and a late subscriber
replays from the operation's start.

Every append is a Lua script (``lua/add_events.lua``) that adds the entry and publishes it,
whole, on one channel, in the same atomic step: subscribers (``EventHub``) get each event in
stream order without reading the stream, and the stream stays the record for replays.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple, cast

import redis
from redis.client import Pipeline

from app.log import current_request_id
from app.storage import scripts

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


class Announcement(NamedTuple):
    """Events to append inside another storage script (a state change and its events in
    one atomic step): the stream and ``add_events.lua``'s arguments for them."""

    stream: str
    args: list[str | int]

    def batch(self) -> dict[str, Any]:
        """The events as ``add_events.lua``'s ``add_batch`` takes them, by name."""
        channel, subject, request, *flat = self.args
        events = [flat[i : i + 3] for i in range(0, len(flat), 3)]
        return {"channel": channel, "subject": subject, "request": request, "events": events}


class EventStore:
    """Append and replay the events of a subject (a workload's ``WorkloadRef.key``)."""

    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._redis = client
        self._append = scripts.load(client, "append_events")
        self._append_if_current = scripts.load(client, "append_events_if_current")
        self._prefix = f"{key_prefix}events:"
        self.channel = f"{key_prefix}events-published"
        """Pub/sub channel carrying every appended event (see ``parse_message``)."""

    def key(self, subject: str) -> str:
        return f"{self._prefix}{subject}"

    def announcement(self, subject: str, events: list[tuple[EventType, str]]) -> Announcement:
        """``events`` in the form another storage script appends them in."""
        return Announcement(self.key(subject), self._args(subject, events))

    def _args(self, subject: str, events: list[tuple[EventType, str]]) -> list[str | int]:
        # The request behind the events (the one being served, or the one that queued the
        # operation being run) is kept in each entry: one spawn is followed by its id from
        # the POST's log line to its run's lines and its events.
        args: list[str | int] = [self.channel, subject, current_request_id() or ""]
        for type_, data in events:
            args += [type_.value, data, TERMINAL_TTL_SECONDS if type_ in TERMINAL else 0]
        return args

    def append(
        self, subject: str, type_: EventType, data: str, pipe: Pipeline | None = None
    ) -> str:
        """Add an event; a terminal one also starts the stream's expiry clock.

        With ``pipe`` the append is only queued there (and the id is not known yet).
        """
        entry_id = self._append(
            keys=[self.key(subject)], args=self._args(subject, [(type_, data)]), client=pipe
        )
        return "" if pipe is not None else str(entry_id)

    def append_if_current(
        self,
        subject: str,
        events: list[tuple[EventType, str]],
        operation_key: str,
        operation_id: str,
    ) -> str | None:
        """Add events only while ``operation_id`` is the workload's current operation.

        One round trip: the check and the append happen atomically in Redis, so an
        operation that was just superseded can never write into its successor's stream.
        Returns the last event's id, or None when the operation is no longer current.
        """
        entry_id = self._append_if_current(
            keys=[self.key(subject), operation_key],
            args=[operation_id, *self._args(subject, events)],
        )
        return str(entry_id) if entry_id else None

    def exists(self, subject: str) -> bool:
        return bool(self._redis.exists(self.key(subject)))

    def last(self, subject: str) -> Event | None:
        """The stream's newest event; None when there is no stream."""
        entries = cast(
            list[tuple[str, dict[str, str]]], self._redis.xrevrange(self.key(subject), count=1)
        )
        return _event(*entries[0]) if entries else None

    def read(self, subject: str, after: str = "0-0") -> list[Event]:
        """Every event after ``after`` (all of them by default)."""
        start = f"({after}" if after != "0-0" else "-"
        entries = cast(
            list[tuple[str, dict[str, str]]], self._redis.xrange(self.key(subject), min=start)
        )
        return [_event(entry_id, fields) for entry_id, fields in entries]


def parse_message(raw: Any) -> tuple[str, Event | None]:
    """A published message as (subject, event); the event is None if unreadable."""
    try:
        subject, entry_id, kind, data = raw.split("\n", 3)
        return subject, Event(entry_id, _TYPES[kind], data)
    except (AttributeError, ValueError, KeyError):
        return "", None


def _event(entry_id: str, fields: dict[str, str]) -> Event:
    return Event(entry_id, _TYPES[fields["type"]], fields.get("data", ""))

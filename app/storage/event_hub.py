"""Deliver events to this process's open event streams from one subscription.

Each open server-sent-event stream could block in its own ``XREAD`` on its own Redis
connection, but then a worker holding 2,000 streams holds 2,000 Redis connections and reads
every event 2,000 times. Instead every append publishes the event itself (see
``EventStore``), this hub, one per process, receives each once, and hands it to the local
streams following that user: no Redis read per stream per event. A stream replays what came
before it opened from the stream itself; while the subscription is reconnecting, events can
be missed, so on reconnecting the hub tells every stream to re-read from where it is.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Iterator

import redis

from app.storage.events import Event, EventStore, entry_order, parse_message

logger = logging.getLogger(__name__)


class _Waiter:
    """One open stream: events handed over by the hub, and a flag to wake it."""

    __slots__ = ("flag", "pending", "resync")

    def __init__(self) -> None:
        self.flag = threading.Event()
        self.pending: deque[Event] = deque()
        self.resync = False


class EventHub:
    """Fans the process's one pub/sub subscription out to its event streams."""

    def __init__(self, client: redis.Redis, events: EventStore) -> None:
        self._client = client
        self._events = events
        self._waiters: dict[str, set[_Waiter]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._listen, name="event-hub", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def close_streams(self) -> None:
        """End every open stream now, without a terminal event, and refuse new waits.

        Called when the worker is asked to stop: open streams would otherwise hold it for
        the whole graceful timeout. Clients reconnect with ``Last-Event-ID`` to another
        worker and lose nothing.
        """
        self._closing = True
        self._resync_all()

    @property
    def streams(self) -> int:
        """How many streams this process is following (for metrics and tests)."""
        with self._lock:
            return sum(len(w) for w in self._waiters.values())

    def follow(self, username: str, after: str, idle_seconds: float) -> Iterator[Event | None]:
        """Events after ``after`` until a terminal one; ``None`` after each quiet period.

        The stream registers before it replays, so an event published meanwhile is both
        replayed and handed over, never neither; positions decide which copy counts.
        """
        waiter = _Waiter()
        with self._lock:
            self._waiters.setdefault(username, set()).add(waiter)
        try:
            cursor = entry_order(after)
            backlog: list[Event] = self._events.read(username, after)
            while True:
                for event in backlog:
                    if event.order <= cursor:
                        continue
                    cursor = event.order
                    yield event
                    if event.terminal:
                        return
                waiter.flag.clear()
                if self._closing:
                    return
                if waiter.resync:
                    waiter.resync = False
                    waiter.pending.clear()
                    backlog = self._events.read(username, "{}-{}".format(*cursor))
                    continue
                backlog = []
                while waiter.pending:
                    backlog.append(waiter.pending.popleft())
                if backlog:
                    continue
                if not waiter.flag.wait(idle_seconds):
                    yield None
        finally:
            with self._lock:
                waiting = self._waiters.get(username)
                if waiting is not None:
                    waiting.discard(waiter)
                    if not waiting:
                        del self._waiters[username]

    def _deliver(self, username: str, event: Event) -> None:
        with self._lock:
            waiters = list(self._waiters.get(username, ()))
        for waiter in waiters:
            waiter.pending.append(event)
            waiter.flag.set()

    def _resync_all(self) -> None:
        with self._lock:
            waiters = [w for group in self._waiters.values() for w in group]
        for waiter in waiters:
            waiter.resync = True
            waiter.flag.set()

    def _listen(self) -> None:
        while not self._stopping.is_set():
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(self._events.channel)
                # Anything published while we were not subscribed is caught up on now.
                self._resync_all()
                while not self._stopping.is_set():
                    message = pubsub.get_message(timeout=0.25)
                    if message is None or message.get("type") != "message":
                        continue
                    username, event = parse_message(message["data"])
                    if event is not None:
                        self._deliver(username, event)
            except redis.RedisError as exc:
                logger.warning("event hub lost Redis (%s); reconnecting", type(exc).__name__)
                self._stopping.wait(1.0)
            finally:
                with contextlib.suppress(redis.RedisError):
                    pubsub.close()

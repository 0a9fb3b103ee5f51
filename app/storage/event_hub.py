"""Wake local event streams when their user's events change, with one subscription per process.

Each open server-sent-event stream could block in its own ``XREAD`` on its own Redis
connection, but then a worker holding 2,000 streams holds 2,000 Redis connections. Instead,
``EventStore.append`` publishes the username on one channel; this hub, one per process,
listens on that channel and sets the flag of every local stream following that user. The
stream then reads its new entries with a short ``XRANGE`` on a pooled connection. A stream
that misses a wake-up (the subscription was reconnecting) is woken by the hub when it
reconnects, and at worst re-reads after its keepalive period.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

import redis

from app.storage.events import Event, EventStore

logger = logging.getLogger(__name__)


class _Waiter:
    __slots__ = ("flag", "username")

    def __init__(self, username: str) -> None:
        self.username = username
        self.flag = threading.Event()


class EventHub:
    """Fans the process's one pub/sub subscription out to its event streams."""

    def __init__(self, client: redis.Redis, events: EventStore) -> None:
        self._client = client
        self._events = events
        self._waiters: dict[str, set[_Waiter]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._listen, name="event-hub", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def streams(self) -> int:
        """How many streams this process is following (for metrics and tests)."""
        with self._lock:
            return sum(len(w) for w in self._waiters.values())

    def follow(self, username: str, after: str, idle_seconds: float) -> Iterator[Event | None]:
        """Events after ``after`` until a terminal one; ``None`` after each quiet period."""
        waiter = _Waiter(username)
        with self._lock:
            self._waiters.setdefault(username, set()).add(waiter)
        try:
            cursor = after
            while True:
                waiter.flag.clear()
                events = self._events.read(username, cursor)
                for event in events:
                    cursor = event.id
                    yield event
                    if event.terminal:
                        return
                if not events and not waiter.flag.wait(idle_seconds):
                    yield None
        finally:
            with self._lock:
                waiting = self._waiters.get(username)
                if waiting is not None:
                    waiting.discard(waiter)
                    if not waiting:
                        del self._waiters[username]

    def _wake(self, username: str | None) -> None:
        with self._lock:
            if username is None:
                waiters = [w for group in self._waiters.values() for w in group]
            else:
                waiters = list(self._waiters.get(username, ()))
        for waiter in waiters:
            waiter.flag.set()

    def _listen(self) -> None:
        while not self._stopping.is_set():
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(self._events.channel)
                # Anything published while we were not subscribed is caught up on now.
                self._wake(None)
                while not self._stopping.is_set():
                    message = pubsub.get_message(timeout=0.25)
                    if message is not None and message.get("type") == "message":
                        self._wake(str(message["data"]))
            except redis.RedisError as exc:
                logger.warning("event hub lost Redis (%s); reconnecting", type(exc).__name__)
                self._stopping.wait(1.0)
            finally:
                with contextlib.suppress(redis.RedisError):
                    pubsub.close()

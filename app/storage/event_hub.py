"""Deliver events to this process's open event streams from one subscription.

Each open server-sent-event stream could block in its own ``XREAD`` on its own Redis
connection, but then a worker holding 2,000 streams holds 2,000 Redis connections and reads
every event 2,000 times. Instead every append publishes the event itself (see
``EventStore``), this hub, one per process, receives each once, and hands it to the local
streams following that workload: no Redis read per stream per event. A stream replays what came
before it opened from the stream itself; while the subscription is reconnecting, events can
be missed, so on reconnecting the hub tells every stream to re-read from where it is.

The same subscription carries other channels for other listeners (the image store learns
of new image lists this way), so a process holds one subscribed connection in all.

A broadcast arrives as thousands of messages at once: the hub hands them over one by one
without yielding while they are already read, so each stream is woken once and sends whatever
arrived together.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable, Generator
from typing import Protocol, cast

import redis

from app import metrics
from app.storage.events import TERMINAL, Event, EventStore, entry_order, parse_message

logger = logging.getLogger(__name__)

HEALTH_SECONDS = 30.0
"""A subscription silent this long is sent a PING; silent as long again, it is replaced
(a Redis that vanished without closing the connection would otherwise go unnoticed)."""


class _Subscription:
    """One subscribed connection (redis-py's ``PubSub``), read one message at a time.

    redis-py opens the connection (authentication, protocol, database, TLS as configured)
    and parses the replies (with hiredis when installed). A message already read from the
    socket comes back without waiting, so a burst is handed over message by message
    without yielding in between, and each stream then sends whatever arrived together.
    """

    def __init__(self, client: redis.Redis, channels: list[str], health_seconds: float) -> None:
        self._pubsub = client.pubsub()
        self._health_seconds = health_seconds
        self._pinged = False
        try:
            self._pubsub.subscribe(*channels)
            confirmed = 0
            while confirmed < len(channels):
                # Wait for the confirmations: only from then on is nothing published missed.
                message = self._pubsub.get_message(timeout=health_seconds)
                if message is None:
                    raise redis.ConnectionError("Redis did not confirm the subscription")
                if message["type"] == "subscribe":
                    confirmed += 1
        except BaseException:
            self._pubsub.close()
            raise

    def next_message(self) -> tuple[str, str] | None:
        """The next message's ``(channel, payload)``; waits up to the health period for it.
        None after a quiet period (a PING goes out; silent as long again, the subscription
        is given up) or for anything that is not a message (a PING's answer)."""
        try:
            message = self._pubsub.get_message(timeout=self._health_seconds)
        except OSError as exc:
            raise redis.ConnectionError(f"the subscription failed: {exc}") from None
        if message is None:
            if self._pinged:
                raise redis.ConnectionError("the subscription stopped answering")
            self._pinged = True
            self._pubsub.ping()
            return None
        self._pinged = False
        if message["type"] != "message":
            return None
        return str(message["channel"]), str(message["data"])

    def close(self) -> None:
        """Close the connection (from the thread that reads it: ``PubSub`` is not shared)."""
        with contextlib.suppress(redis.RedisError, OSError):
            self._pubsub.close()


class _Flag(Protocol):
    def set(self) -> None: ...
    def clear(self) -> None: ...
    def wait(self, timeout: float | None = None) -> bool: ...


def _flag_factory() -> Callable[[], _Flag]:
    """The cheapest wake-up flag for how this process runs.

    Under gevent's monkey-patching a ``threading.Event`` is built from a condition and a
    lock allocated per wait; gevent's own ``Event`` wakes a greenlet in about half the time,
    which counts when one broadcast wakes thousands of streams. Plain threads (tests, tools)
    keep ``threading.Event``.
    """
    try:
        from gevent import monkey
        from gevent.event import Event as GreenEvent
    except ImportError:  # pragma: no cover - gevent is a dependency of the service
        return threading.Event
    if monkey.is_module_patched("threading"):
        return cast(Callable[[], _Flag], GreenEvent)
    return threading.Event


class _Waiter:
    """One open stream: events handed over by the hub, and a flag to wake it."""

    __slots__ = ("active", "flag", "keepalive", "pending", "resync")

    def __init__(self, flag: _Flag) -> None:
        self.flag = flag
        self.pending: deque[Event] = deque()
        self.resync = False
        self.active = True
        """Something was sent since the last keepalive sweep."""
        self.keepalive = False


class _Sweeper:
    """Wakes the quiet streams of one idle period so they send a keepalive.

    A stream waiting with a timeout costs a timer started and cancelled on every event,
    which is most of a wake-up's price when a broadcast wakes thousands of streams; so
    streams wait without one, and this sweeper runs every half period instead. A stream
    with nothing sent for a whole half period gets a keepalive: never later than the
    period, never sooner than half of it.
    """

    def __init__(self, period: float, stopping: threading.Event) -> None:
        self._interval = period / 2
        self._stopping = stopping
        self._lock = threading.Lock()
        self._waiters: set[_Waiter] = set()
        threading.Thread(target=self._run, name="event-keepalive", daemon=True).start()

    def add(self, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters.add(waiter)

    def discard(self, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters.discard(waiter)

    def _run(self) -> None:
        while not self._stopping.wait(self._interval):
            with self._lock:
                waiters = list(self._waiters)
            for waiter in waiters:
                if waiter.active:
                    waiter.active = False
                else:
                    waiter.keepalive = True
                    waiter.flag.set()


class Following:
    """One open stream of a workload's events (see ``EventHub.follow``): iterate it for
    batches, and close it when done, whether or not it was iterated."""

    def __init__(
        self,
        batches: Generator[list[Event] | None, None, None],
        replayed: bool,
        release: Callable[[], None],
    ) -> None:
        self._batches = batches
        self.replayed = replayed
        """The replay found events: the stream exists."""
        self._release = release
        self._closed = False

    def __iter__(self) -> Following:
        return self

    def __next__(self) -> list[Event] | None:
        try:
            return next(self._batches)
        except StopIteration:
            self.close()
            raise

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._batches.close()
            self._release()

    @classmethod
    def ended(cls) -> Following:
        """A stream with nothing more to say: its operation ended before the events its
        client resumes after."""

        def nothing() -> Generator[list[Event] | None, None, None]:
            yield from ()

        return cls(nothing(), False, lambda: None)


class ChannelListener(Protocol):
    """Something else this process learns of through the hub's subscription."""

    channel: str

    def on_message(self, payload: str) -> None:
        """A message arrived on ``channel``."""

    def on_subscription(self, active: bool) -> None:
        """The subscription now holds (True: from here on no message is missed) or was
        lost (False: messages may be missed until it holds again)."""


class EventHub:
    """Fans the process's one pub/sub subscription out to its event streams, and to the
    listeners of its other channels."""

    def __init__(
        self,
        client: redis.Redis,
        events: EventStore,
        health_seconds: float = HEALTH_SECONDS,
        retry_seconds: float = 1.0,
    ) -> None:
        self._client = client
        self._events = events
        self._health_seconds = health_seconds
        self._retry_seconds = retry_seconds
        self._subscription: _Subscription | None = None
        self._subscriptions = 0
        self._new_flag = _flag_factory()
        self._waiters: dict[str, set[_Waiter]] = {}
        self._sweepers: dict[float, _Sweeper] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._listeners: dict[str, ChannelListener] = {}
        self._wake_channel = ""
        """This hub's own channel: a message there only wakes its listener. Named when the
        hub starts, in the process that runs it (workers fork from one built app)."""

    def add_listener(self, listener: ChannelListener) -> None:
        """Also subscribe to ``listener.channel`` (before ``start``)."""
        self._listeners[listener.channel] = listener

    def start(self) -> None:
        self._wake_channel = f"{self._events.channel}:wake:{uuid.uuid4().hex}"
        self._thread = threading.Thread(target=self._listen, name="event-hub", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._subscription is not None:
            # Wakes the listener's blocking read, so it sees it must stop and closes its
            # connection itself.
            with contextlib.suppress(redis.RedisError):
                self._client.publish(self._wake_channel, "stop")
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
    def subscriptions(self) -> int:
        """How many times the hub has subscribed (1 unless it had to reconnect)."""
        return self._subscriptions

    @property
    def streams(self) -> int:
        """How many streams this process is following (for metrics and tests)."""
        with self._lock:
            return sum(len(w) for w in self._waiters.values())

    def follow(self, subject: str, after: str, idle_seconds: float) -> Following:
        """Start following ``subject``'s events after ``after``: registered, and the
        replay read, by the time this returns (``Following.replayed`` tells a stream with
        a past from one that may not exist, without asking Redis again).

        Iterating gives batches of events until a terminal one, and ``None`` after each
        quiet period. Events come in batches of whatever arrived together (a replay, or
        the events one script appended), so the stream writes them to its client in one
        piece: a write is a system call and a wake-up of the client, and they cost more
        than the event. The stream registers before it replays, so an event published
        meanwhile is both replayed and handed over, never neither; positions decide which
        copy counts.
        """
        waiter = _Waiter(self._new_flag())
        with self._lock:
            self._waiters.setdefault(subject, set()).add(waiter)
            sweeper = self._sweepers.get(idle_seconds)
            if sweeper is None:
                sweeper = self._sweepers[idle_seconds] = _Sweeper(idle_seconds, self._stopping)
        sweeper.add(waiter)
        metrics.EVENT_STREAMS.inc()

        def release() -> None:
            metrics.EVENT_STREAMS.dec()
            sweeper.discard(waiter)
            with self._lock:
                waiting = self._waiters.get(subject)
                if waiting is not None:
                    waiting.discard(waiter)
                    if not waiting:
                        del self._waiters[subject]

        try:
            backlog: list[Event] = self._events.read(subject, after)
        except BaseException:
            release()
            raise
        batches = self._batches(subject, entry_order(after), waiter, backlog)
        return Following(batches, bool(backlog), release)

    def _batches(
        self, subject: str, cursor: tuple[int, int], waiter: _Waiter, backlog: list[Event]
    ) -> Generator[list[Event] | None, None, None]:
        while True:
            batch: list[Event] = []
            for event in backlog:
                order = entry_order(event.id)
                if order <= cursor:
                    continue
                cursor = order
                batch.append(event)
                if event.type in TERMINAL:
                    break
            if batch:
                waiter.active = True
                yield batch
                if batch[-1].type in TERMINAL:
                    return
            waiter.flag.clear()
            if self._closing:
                return
            if waiter.resync:
                waiter.resync = False
                waiter.pending.clear()
                backlog = self._events.read(subject, "{}-{}".format(*cursor))
                continue
            backlog = []
            while waiter.pending:
                backlog.append(waiter.pending.popleft())
            if backlog:
                continue
            if waiter.keepalive:
                waiter.keepalive = False
                waiter.active = True
                yield None
                continue
            waiter.flag.wait()

    def _deliver(self, subject: str, event: Event) -> None:
        with self._lock:
            waiting = self._waiters.get(subject)
            waiters = tuple(waiting) if waiting else ()
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
            try:
                channels = [self._events.channel, self._wake_channel, *self._listeners]
                self._subscription = _Subscription(self._client, channels, self._health_seconds)
                for listener in self._listeners.values():
                    listener.on_subscription(True)
                self._subscriptions += 1
                # Anything published while we were not subscribed is caught up on now.
                self._resync_all()
                events_channel = self._events.channel
                while not self._stopping.is_set():
                    received = self._subscription.next_message()
                    if received is None:
                        continue
                    channel, payload = received
                    if channel == events_channel:
                        subject, event = parse_message(payload)
                        if event is not None:
                            self._deliver(subject, event)
                    elif channel != self._wake_channel:
                        self._listeners[channel].on_message(payload)
            except redis.RedisError as exc:
                self._drop_subscription()
                if self._stopping.is_set():
                    break
                logger.warning("event hub lost Redis (%s); reconnecting", type(exc).__name__)
                self._stopping.wait(self._retry_seconds)
            finally:
                self._drop_subscription()

    def _drop_subscription(self) -> None:
        if self._subscription is not None:
            for listener in self._listeners.values():
                listener.on_subscription(False)
            self._subscription.close()
            self._subscription = None

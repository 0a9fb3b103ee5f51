"""Run a piece of background work in exactly one worker across all processes and replicas.

Every worker runs an ``ElectedWorker``; whichever takes the ``RedisLease`` first calls the
work function for as long as it keeps renewing the lease. Leadership comes in tenures: a
tenure ends when a renewal fails (the lease expired, someone else took it, or Redis cannot
confirm it) or the process stops, and the work function must return promptly when its
tenure ends. Its successor, elected once the lease is released or expires, starts from
scratch, so nothing that happened under the old tenure is trusted by the new one.

A leader that cannot reach Redis cannot renew, and cannot learn that it lost the lease
either: so a tenure also ends by the leader's own clock, when the last renewal Redis
confirmed runs out (less a margin for clock drift), which is before Redis lets the lease
expire and another worker take it. Two leaders never act at once; what a deposed leader
still writes through its ``Tenure.fence`` is refused.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import partial

import redis

from app import metrics
from app.storage.leader import Fence, LeadershipLease

logger = logging.getLogger(__name__)


DRIFT_MARGIN = 0.05
"""The share of a lease's TTL a leader gives up to clock drift: its tenure ends that much
before the lease could expire in Redis."""


class Tenure:
    """One uninterrupted period of leadership, ended at most once.

    ``fence`` is what the leader's Redis writes name so that they are refused once the
    lease moved (None for a tenure made without a lease, as in tests).
    """

    def __init__(self, fence: Fence | None = None) -> None:
        self.fence = fence
        self._ended = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early when the tenure ends; True if it ended."""
        return self._ended.wait(seconds)

    def on_end(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when the tenure ends (at once if it has); returns an undo.

        Lets the work interrupt something blocking, such as an open watch, the moment
        leadership is lost instead of when that call would return by itself.
        """
        with self._lock:
            if not self._ended.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def end(self) -> None:
        with self._lock:
            if self._ended.is_set():
                return
            self._ended.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                logger.exception("tenure end callback failed")

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


class ElectedWorker:
    """Competes for ``lease`` and runs ``lead(tenure)`` whenever it holds it.

    The lease is renewed every third of its TTL, so one missed renewal does not cost the
    leadership; a candidate retries every quarter TTL, so after a clean release a successor
    leads within a quarter TTL, and after a crash within about one and a quarter TTLs.
    """

    def __init__(
        self, lease: LeadershipLease, lead: Callable[[Tenure], None], *, name: str
    ) -> None:
        self._lease = lease
        self._lead = lead
        self._name = name
        ttl = lease.ttl_ms / 1000
        self._renew_seconds = ttl / 3
        self._retry_seconds = ttl / 4
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._tenure: Tenure | None = None
        self._thread: threading.Thread | None = None

    @property
    def owner(self) -> str:
        return self._lease.owner

    @property
    def loop(self) -> str:
        """The elected loop's name."""
        return self._lease.loop

    @property
    def lease_key(self) -> str:
        return self._lease.key

    @property
    def is_leader(self) -> bool:
        """Whether this worker believes it leads now (for health reports and tests)."""
        with self._lock:
            return self._tenure is not None and not self._tenure.ended

    def start(self) -> None:
        self._thread = threading.Thread(target=self._campaign, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End any tenure and give the lease up, so another worker leads without delay."""
        self._stopping.set()
        with self._lock:
            tenure = self._tenure
        if tenure is not None:
            tenure.end()
        if self._thread is not None:
            self._thread.join(timeout)
        self._release()

    # Internals -----------------------------------------------------------------------

    def _campaign(self) -> None:
        while not self._stopping.is_set():
            asked = time.monotonic()
            elected = self._ask(self._lease.acquire, "election skipped, Redis unavailable")
            if elected and not self._stopping.is_set():
                self._serve(valid_until=self._valid_until(asked))
            self._stopping.wait(self._retry_seconds)

    def _valid_until(self, asked: float) -> float:
        """When, by this process's clock, a lease Redis granted or renewed after ``asked``
        could at the earliest expire, less the drift margin."""
        return asked + (self._lease.ttl_ms / 1000) * (1 - DRIFT_MARGIN)

    def _serve(self, *, valid_until: float) -> None:
        tenure = Tenure(self._lease.fence)
        with self._lock:
            self._tenure = tenure
        metrics.LEADER.labels(self.loop).set(1)
        logger.info("%s: %s now leads", self._name, self.owner)
        heartbeat = self._daemon(partial(self._heartbeat, tenure, valid_until), "lease")
        try:
            if not self._stopping.is_set():
                self._lead(tenure)
        except Exception:
            logger.exception("%s: leading failed", self._name)
        finally:
            tenure.end()
            heartbeat.join()
            with self._lock:
                self._tenure = None
            metrics.LEADER.labels(self.loop).set(0)
            self._release()
            logger.info("%s: %s no longer leads", self._name, self.owner)

    def _heartbeat(self, tenure: Tenure, valid_until: float) -> None:
        """Renew the lease every third of its TTL while the tenure lasts, and end the tenure
        when a renewal fails or the lease's time by this clock runs out, whichever is first
        (a renewal can hang on a Redis that stopped answering, for up to the socket timeout).
        """
        confirmed = [valid_until]
        renewer = self._daemon(partial(self._renew_loop, tenure, confirmed), "renew")
        while not tenure.ended:
            left = confirmed[0] - time.monotonic()
            if left <= 0:
                logger.warning(
                    "%s: %s stepped down, its lease unconfirmed until it could expire",
                    self._name,
                    self.owner,
                )
                tenure.end()
                break
            tenure.wait(left)
        renewer.join()

    def _renew_loop(self, tenure: Tenure, confirmed: list[float]) -> None:
        while not tenure.wait(self._renew_seconds):
            asked = time.monotonic()
            # Without Redis we cannot know whether the lease still holds; stepping down is
            # safe, a second leader is not.
            held = self._ask(self._lease.renew, "cannot renew the lease")
            if not held:
                logger.warning("%s: %s lost the lease", self._name, self.owner)
                tenure.end()
                return
            confirmed[0] = self._valid_until(asked)

    def _ask(self, lease_call: Callable[[], bool], unanswered: str) -> bool:
        """Whether the lease says yes; no when Redis cannot be asked (logged with
        ``unanswered``), since a lease Redis does not confirm is not held."""
        try:
            return lease_call()
        except redis.RedisError as exc:
            logger.warning("%s: %s (%s)", self._name, unanswered, exc)
            return False

    def _daemon(self, run: Callable[[], None], role: str) -> threading.Thread:
        """``run`` started in a daemon thread named after the loop and its ``role`` there."""
        thread = threading.Thread(target=run, name=f"{self._name}-{role}", daemon=True)
        thread.start()
        return thread

    def _release(self) -> None:
        try:
            self._lease.release()
        except redis.RedisError as exc:
            logger.warning("%s: cannot release the lease (%s); it will expire", self._name, exc)


class ElectedLoop(ABC):
    """A loop only one worker of all replicas runs at a time: the elected watcher, the image
    refresher, the prepuller. A subclass says what its leader does (``_lead``); this holds
    its candidacy, under the lease ``<key_prefix>leader:<loop>``."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        key_prefix: str,
        loop: str,
        ttl_seconds: float,
        owner: str | None = None,
    ) -> None:
        lease = LeadershipLease(
            client,
            key=f"{key_prefix}leader:{loop}",
            loop=loop,
            owner=owner,
            ttl_seconds=ttl_seconds,
        )
        self.lease_key = lease.key
        self._election = ElectedWorker(lease, self._lead, name=loop)

    @abstractmethod
    def _lead(self, tenure: Tenure) -> None:
        """What the leader does during ``tenure``; it returns once the tenure has ended."""

    @property
    def owner(self) -> str:
        return self._election.owner

    @property
    def election(self) -> ElectedWorker:
        """This process's candidacy for the loop (``GET /spawner/v1/leaders`` lists them)."""
        return self._election

    @property
    def is_leader(self) -> bool:
        return self._election.is_leader

    def start(self) -> None:
        self._election.start()

    def stop(self) -> None:
        self._election.stop()

"""Caps that keep one user, or all of them together, from starving the service.

- **Event streams.** Each open stream holds one of a worker's connections for as long as
  it lasts. Streams are counted per process, because what they exhaust is a worker's
  connections: at most ``limits.streamsPerUser`` of a lab's streams are open in one worker
  at a time (JupyterHub follows a spawn with one), and at most ``limits.streamsPerWorker``
  of all streams (below gunicorn's ``worker_connections``, so that a worker full of streams
  still answers everything else; a client refused here finds room on another worker).
- **Spawns and deletes.** Each starts Kubernetes work. At most
  ``limits.mutationsPerMinute`` per lab per minute, counted in Redis across every worker and
  replica. Creations are also counted per group, with fair admission
  (``app.engine.admission``), which knows the group.

Past any cap the answer is 429 ``too_many_requests`` with ``Retry-After``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.config.models import LimitsConfig
from app.errors import TooManyRequestsError
from app.storage.rate_limits import RateLimits

MUTATION_WINDOW_SECONDS = 60.0


class StreamSlots:
    """How many event streams this process has open, in all and for each lab."""

    def __init__(self, per_user: int, per_worker: int | None = None) -> None:
        self._per_user = per_user
        self._per_worker = per_worker
        self._open: dict[str, int] = {}
        self._total = 0
        self._lock = threading.Lock()

    def open_count(self, username: str | None = None) -> int:
        """Streams open for ``username``'s lab, or in all when None."""
        with self._lock:
            return self._total if username is None else self._open.get(username, 0)

    def acquire(self, username: str | None, *, retry_after: int) -> Callable[[], None]:
        """Take a slot for a stream of ``username``'s lab (None: a stream of no lab, which
        counts only in all); the returned function gives it back (once, however often it is
        called). 429 when the worker's or the lab's are all taken."""
        with self._lock:
            if self._per_worker is not None and self._total >= self._per_worker:
                raise TooManyRequestsError(
                    f"this worker already has {self._total} event streams open, its most; "
                    "try again later",
                    retry_after=retry_after,
                )
            held = self._open.get(username, 0) if username is not None else 0
            if username is not None and held >= self._per_user:
                raise TooManyRequestsError(
                    f"{username}'s lab already has {held} event streams open here; "
                    "close one or try again later",
                    retry_after=retry_after,
                )
            if username is not None:
                self._open[username] = held + 1
            self._total += 1
        released = threading.Event()

        def release() -> None:
            if released.is_set():
                return
            released.set()
            with self._lock:
                self._total -= 1
                if username is None:
                    return
                left = self._open.get(username, 0) - 1
                if left > 0:
                    self._open[username] = left
                else:
                    self._open.pop(username, None)

        return release


class Limits:
    """The caps of one process: stream slots here, mutation counts in Redis."""

    def __init__(self, config: LimitsConfig, rates: RateLimits) -> None:
        self.config = config
        self.streams = StreamSlots(config.streams_per_user, config.streams_per_worker)
        self._rates = rates

    def count_mutation(self, username: str, kind: str = "lab") -> None:
        """Count a creation or deletion of one of ``username``'s workloads of ``kind`` (their
        lab, a cluster, a kernel); 429 past the per-minute cap. Each kind is counted apart, so
        that a notebook restarting kernels never keeps its user from spawning their lab."""
        wait = self._rates.take(
            scope="mutations" if kind == "lab" else f"mutations-{kind}",
            name=username,
            limit=self.config.mutations_per_minute,
            window_seconds=MUTATION_WINDOW_SECONDS,
        )
        if wait:
            raise TooManyRequestsError(
                f"at most {self.config.mutations_per_minute} creations and deletions of "
                f"{username}'s {kind}s a minute; try again in {wait}s",
                retry_after=wait,
            )

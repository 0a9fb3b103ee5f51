"""Caps that keep one user, or all of them together, from starving the service.

Every cap is the caller's, never the workload's: what one user sends never makes the service
refuse someone else, and above all never refuses JupyterHub or an administrator (a token
with ``admin:notebook``), whose deletes and event streams are what end a user's flood. Their
requests count only against what protects the process itself (the worker's streams).

- **Event streams.** Each open stream holds one of a worker's connections for as long as
  it lasts. Streams are counted per process, because what they exhaust is a worker's
  connections: at most ``limits.streamsPerUser`` of a user's own streams are open in one
  worker at a time (JupyterHub follows a spawn with one, with its own token), and at most
  ``limits.streamsPerWorker`` of all streams (below gunicorn's ``worker_connections``, so
  that a worker full of streams still answers everything else; a client refused here finds
  room on another worker).
- **Changes.** Spawns, deletes and the other changes of a workload each start Kubernetes
  work. At most ``limits.mutationsPerMinute`` of a user's changes of one kind of workload per
  minute, counted in Redis across every worker and replica. A change refused before any
  work was done (a 4xx: a bad body, an unknown size, a lab that exists) is given back, so a
  budget meant for changes is not used up by mistakes. Creations are also counted per
  group, with fair admission (``app.engine.admission``), which knows the group.

Past any cap the answer is 429 ``too_many_requests`` with ``Retry-After``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from app.errors import ServiceError, TooManyRequestsError
from app.models.config import LimitsConfig
from app.models.identity import Caller
from app.storage.rate_limits import RateLimits

MUTATION_WINDOW_SECONDS = 60.0


class StreamSlots:
    """How many event streams this process has open, in all and for each caller."""

    def __init__(self, per_user: int, per_worker: int | None = None) -> None:
        self._per_user = per_user
        self._per_worker = per_worker
        self._open: dict[str, int] = {}
        self._total = 0
        self._lock = threading.Lock()

    def open_count(self, username: str | None = None) -> int:
        """Streams ``username`` has open, or in all when None."""
        with self._lock:
            return self._total if username is None else self._open.get(username, 0)

    def acquire(self, username: str | None, *, retry_after: int) -> Callable[[], None]:
        """Take a slot for a stream ``username`` opens (None: one that counts only in all);
        the returned function gives it back (once, however often it is called). 429 when
        the worker's or the user's are all taken."""
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
                    f"{username} already has {held} event streams open here; "
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

    @contextmanager
    def change(self, caller: Caller, kind: str = "lab") -> Iterator[None]:
        """Count the change the block makes, as ``caller``'s change of a workload of ``kind``
        (a lab, a cluster, a kernel, an app): 429 past the per-minute cap, given back if the
        block refuses it (a 4xx). Each kind is counted apart, so that a notebook restarting
        kernels never keeps its user from spawning their lab; an administrator's changes
        are not counted."""
        if caller.is_admin:
            yield
            return
        scope, name = f"changes-{kind}", caller.username
        limit = self.config.mutations_per_minute
        wait = self._rates.take(
            scope=scope, name=name, limit=limit, window_seconds=MUTATION_WINDOW_SECONDS
        )
        if wait:
            raise TooManyRequestsError(
                f"at most {limit} changes of {kind}s a minute by {name}; try again in {wait}s",
                retry_after=wait,
            )
        try:
            yield
        except ServiceError as exc:
            if 400 <= exc.status < 500 and not isinstance(exc, TooManyRequestsError):
                self._rates.give_back(scope=scope, name=name)
            raise

    def stream(self, caller: Caller, *, retry_after: int) -> Callable[[], None]:
        """A slot for an event stream ``caller`` opens; the function gives it back. The
        caller's own slots are counted, except an administrator's, which count only in
        all."""
        owner = None if caller.is_admin else caller.username
        return self.streams.acquire(owner, retry_after=retry_after)

"""Per-user caps, so that one user cannot starve everyone else.

- **Event streams.** Each open stream holds one of a worker's connections for as long as
  it lasts. Streams are counted per lab and per process, because what one user could
  exhaust is a worker's connections: at most ``limits.streamsPerUser`` of a lab's streams
  are open in one worker at a time (JupyterHub follows a spawn with one).
- **Spawns and deletes.** Each starts Kubernetes work. At most
  ``limits.mutationsPerMinute`` per lab per minute, counted in Redis across every worker and
  replica.

Past either cap the answer is 429 ``too_many_requests`` with ``Retry-After``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.config.models import LimitsConfig
from app.errors import TooManyRequestsError
from app.storage.rate_limits import RateLimits

MUTATION_WINDOW_SECONDS = 60.0


class StreamSlots:
    """How many event streams each lab has open in this process."""

    def __init__(self, per_user: int) -> None:
        self._per_user = per_user
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def open_count(self, username: str) -> int:
        with self._lock:
            return self._open.get(username, 0)

    def acquire(self, username: str, *, retry_after: int) -> Callable[[], None]:
        """Take a slot for a stream of ``username``'s lab; the returned function gives it
        back (once, however often it is called). 429 when all are taken."""
        with self._lock:
            held = self._open.get(username, 0)
            if held >= self._per_user:
                raise TooManyRequestsError(
                    f"{username}'s lab already has {held} event streams open here; "
                    "close one or try again later",
                    retry_after=retry_after,
                )
            self._open[username] = held + 1
        released = threading.Event()

        def release() -> None:
            if released.is_set():
                return
            released.set()
            with self._lock:
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
        self.streams = StreamSlots(config.streams_per_user)
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

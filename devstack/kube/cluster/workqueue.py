"""A controller's work queue: objects marked for a sync, each synced once per reactor turn.

A controller hears of an object many times in a burst (its pods change one after another, a
node joins); syncing it on each would repeat the same work. Marking it instead queues one
pass on the reactor's next turn, which syncs every marked object once, in a stable order.
"""

from __future__ import annotations

from collections.abc import Callable

from .reactor import Reactor

Key = tuple[str, str]
"""An object's namespace and name."""


class SyncQueue:
    """Objects to sync, by key; ``sync`` is called on the reactor thread for each."""

    def __init__(self, reactor: Reactor, sync: Callable[[str, str], None]) -> None:
        self._reactor = reactor
        self._sync = sync
        self._dirty: set[Key] = set()
        self._queued = False

    def mark(self, namespace: str, name: str) -> None:
        """Sync the object on the reactor's next pass (once, however often it is marked)."""
        self._dirty.add((namespace, name))
        if not self._queued:
            self._queued = True
            self._reactor.submit(self._flush)

    def _flush(self) -> None:
        self._queued = False
        dirty, self._dirty = self._dirty, set()
        for namespace, name in sorted(dirty):
            self._sync(namespace, name)

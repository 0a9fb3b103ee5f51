"""Fan-out of store changes to watch streams, with a bounded history for resuming.

The hub is a store subscriber. For each committed change it appends one entry to a ring
buffer and pushes it onto the queue of every matching watcher, all under its own short lock;
each watch's HTTP thread then serializes and writes from its queue without holding any lock,
so a slow client never slows the store or other watchers.

Resuming from a resourceVersion replays the ring buffer; a version older than the buffer
reaches back is answered with a 410 Expired event, as a real server does once etcd has
compacted it away.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from devstack.kube import errors
from devstack.kube.resources import ResourceRegistry
from devstack.kube.selectors import Predicate
from devstack.kube.store import Change, Store


@dataclass
class _Entry:
    """A change as the hub keeps it; the JSON of the object is rendered at most once."""

    change: Change
    served: ResourceRegistry
    _json: str | None = None

    def object_json(self) -> str:
        if self._json is None:
            obj = self.change.object
            resource = self.served.by_plural(self.change.resource)
            if "kind" not in obj and resource is not None:
                # Cluster-side writes may omit the type; the client needs it in events.
                obj = {"kind": resource.kind, "apiVersion": resource.group_version, **obj}
            self._json = json.dumps(obj, separators=(",", ":"))
        return self._json


_CLOSE = object()


@dataclass(eq=False)
class Watcher:
    """One open watch: what it wants and the queue of entries waiting to be written."""

    resource: str
    namespace: str | None
    matches: Predicate
    queue: queue.SimpleQueue[Any] = field(default_factory=queue.SimpleQueue)
    closed: bool = False
    since: int = 0
    """Changes at or before this version are already covered by the start of the stream."""

    def wants(self, change: Change) -> bool:
        if change.resource != self.resource:
            return False
        if self.namespace is None:
            return True
        return (change.object.get("metadata") or {}).get("namespace") == self.namespace

    def close(self) -> None:
        """Ask the stream to end after what is already queued."""
        self.closed = True
        self.queue.put(_CLOSE)

    def event_line(self, entry: _Entry) -> str | None:
        """The NDJSON line for ``entry`` as this watcher sees it, or ``None`` to skip it.

        With a selector, an object that starts matching arrives as ADDED and one that stops
        matching as DELETED, as kube-apiserver does.
        """
        change = entry.change
        now = self.matches(change.object)
        kind = change.type
        if kind == "MODIFIED" and change.old is not None:
            before = self.matches(change.old)
            if before and not now:
                kind = "DELETED"
            elif now and not before:
                kind = "ADDED"
            elif not now:
                return None
        elif not now:
            return None
        return f'{{"type":"{kind}","object":{entry.object_json()}}}\n'


class WatchHub:
    """Registers watchers and feeds them; one per emulator."""

    def __init__(self, store: Store, history: int, served: ResourceRegistry) -> None:
        self._served = served
        self._lock = threading.Lock()
        self._history: deque[_Entry] = deque(maxlen=history)
        self._oldest_lost = 0
        """The newest resourceVersion evicted from the history (0 while nothing was)."""
        self._watchers: set[Watcher] = set()
        self._unsubscribe = store.subscribe_changes(self._on_change)

    def close(self) -> None:
        self._unsubscribe()
        self.drop_all()

    def _on_change(self, change: Change) -> None:
        entry = _Entry(change, self._served)
        with self._lock:
            if len(self._history) == self._history.maxlen:
                self._oldest_lost = self._history[0].change.resource_version
            self._history.append(entry)
            for watcher in self._watchers:
                # A change committed before the watch's snapshot but announced after it
                # registered is already in the snapshot; skip it.
                if change.resource_version > watcher.since and watcher.wants(change):
                    watcher.queue.put(entry)

    def open(self, watcher: Watcher, since: int, initial: list[dict[str, Any]]) -> None:
        """Start ``watcher`` with changes after ``since``; ``initial`` objects go first.

        ``initial`` (synthetic ADDED events) is for a watch without a resourceVersion, in
        which case ``since`` is the version the snapshot was taken at. Raises 410 if
        ``since`` is older than the retained history.
        """
        watcher.since = since
        for obj in initial:
            if watcher.matches(obj):
                watcher.queue.put(
                    _Entry(Change("ADDED", watcher.resource, obj, None, since), self._served)
                )
        with self._lock:
            if since < self._oldest_lost:
                raise errors.gone(f"too old resource version: {since} ({self._oldest_lost + 1})")
            # The history is in commit order (the store announces changes so), so only its
            # newest entries can be after ``since``: read back to the first the watch has.
            # Reading it all, under the lock every write's announcement takes, held every
            # write back meanwhile: a profile of a storm of 300 spawns, each watching its pod
            # anew every few seconds, once put about 40% of the emulator's samples there.
            newer: list[_Entry] = []
            for entry in reversed(self._history):
                if entry.change.resource_version <= since:
                    break
                newer.append(entry)
            for entry in reversed(newer):
                if watcher.wants(entry.change):
                    watcher.queue.put(entry)
            self._watchers.add(watcher)

    def remove(self, watcher: Watcher) -> None:
        with self._lock:
            self._watchers.discard(watcher)

    def drop_all(self) -> int:
        """Close every open watch now (a fault for tests); returns how many were open."""
        with self._lock:
            watchers = list(self._watchers)
            self._watchers.clear()
        for watcher in watchers:
            watcher.close()
        return len(watchers)

    @property
    def open_count(self) -> int:
        with self._lock:
            return len(self._watchers)


def stream_lines(
    watcher: Watcher,
    timeout: float | None,
    alive: Callable[[], bool] | None = None,
    poll: float = 0.25,
) -> Iterator[str]:
    """Yield the watcher's lines until it is closed, ``timeout`` passes or ``alive()`` fails.

    ``alive`` is checked whenever the queue is idle for ``poll`` seconds so a watch whose
    client went away is released even when nothing changes.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        wait = poll
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            wait = min(poll, remaining)
        try:
            item = watcher.queue.get(timeout=wait)
        except queue.Empty:
            if alive is not None and not alive():
                return
            continue
        if item is _CLOSE:
            return
        line = watcher.event_line(item)
        if line is not None:
            yield line

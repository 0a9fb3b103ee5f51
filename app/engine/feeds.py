"""One watch of a kind's objects, shared by every operation in this process waiting on one.

An operation waiting for its pod used to watch that pod alone. In a storm of 300 spawns the
runner then held 300 watch requests open at once, each on a TLS connection of its own to the
API server: 300 such watches grew a process by 25 MiB (about 85 KiB each, of which a
greenlet waiting on an event is 12 KiB), and the API server kept 300 watches for it. Controllers
in the field share one watch per kind of object instead (an informer; kubespawner's
reflector). A ``WatchFeed`` is that for the objects one label selector matches: it watches
while any operation follows one of them (``follow``), hands each change to the followers of
that object, and closes at the end of a watch request that finds none following.

A feed keeps no copy of the objects, which in a large cluster would cost more than the
watches it saves. It starts from the version of a one-item list
(``KubernetesStorage.tracked_version``), and a follower reads its object itself *after*
subscribing, so every change after that read reaches it. Changes from a little before the
read may reach it too: they are the ones a watch of that one object, opened a little
earlier, would have shown. Whenever the feed starts over (its first watch, a 410, a lost
connection) or a follower's queue overflows, that follower's wait raises ``FeedRestarted``
(a ``WatchExpired``) and it reads its object again, as after a per-object watch expired;
while the feed cannot watch, each wait ends so, and followers read their object every
couple of seconds rather than wait on a watch that is not there. And a follower that has
heard nothing of its object for ``RESYNC_SECONDS`` reads it again too, as informers resync:
whatever a watch could miss (an object whose labels no longer match, say) costs that long
at most, and a pod whose image takes minutes to pull costs a read every half-minute.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from app.concurrency import Task, start_task
from app.storage.kubernetes import KubernetesError, KubernetesStorage, Watch, WatchExpired

logger = logging.getLogger(__name__)

WATCH_SECONDS = 10
"""How long each of a feed's watch requests lasts. At its end the feed reopens from the last
version it saw, or closes if no one follows any more: an idle feed holds its watch this
long at most."""

QUEUE_LIMIT = 64
"""Changes waiting for one follower. A pod changes a handful of times as it starts; a
follower that falls this far behind reads its object again instead."""

RESYNC_SECONDS = 30.0
"""How long a follower waits on the feed alone, hearing nothing, before it reads again."""

_MAX_PAUSE_SECONDS = 30.0

ObjectKey = tuple[str, str]
"""An object's namespace ("" for a cluster-wide object) and name."""


class FeedRestarted(WatchExpired):
    """The feed may have missed changes since the follower's last read: read again."""


class WatchFeed:
    """The shared watch of the objects of ``resource`` that ``selector`` matches, in
    ``namespace`` or every namespace; opened by the first ``follow``."""

    def __init__(
        self,
        kube: KubernetesStorage,
        resource: str,
        selector: str,
        *,
        namespace: str | None = None,
        watch_seconds: int = WATCH_SECONDS,
        resync_seconds: float = RESYNC_SECONDS,
    ) -> None:
        self._kube = kube
        self.resource = resource
        self.selector = selector
        self._namespace = namespace
        self._watch_seconds = watch_seconds
        self.resync_seconds = resync_seconds
        self._lock = threading.Lock()
        self._followers: dict[ObjectKey, set[Follower]] = {}
        self._task: Task | None = None
        self._stream: Watch | None = None
        self._stopping = threading.Event()
        self._start = 0
        """Counts the feed's starts: a follower that read its object during an earlier one
        (or before the first) may have missed a change."""
        self._watching = False
        """Whether the current start's watch holds: changes since its version reach the
        followers."""
        self.watch_requests = 0
        """Watch requests this feed made (tests and benchmarks compare it with followers)."""

    @contextlib.contextmanager
    def follow(self, namespace: str | None, name: str) -> Iterator[Follower]:
        """Subscribe to the object's changes for the block; read the object *inside* it."""
        follower = Follower(self, (namespace or "", name))
        with self._lock:
            self._followers.setdefault(follower.key, set()).add(follower)
            follower.seen_start = self._current_start()
            if self._task is None and not self._stopping.is_set():
                self._task = start_task(self._run, name=f"feed-{self.resource}")
        try:
            yield follower
        finally:
            with self._lock:
                followers = self._followers.get(follower.key)
                if followers is not None:
                    followers.discard(follower)
                    if not followers:
                        del self._followers[follower.key]

    def stop(self) -> None:
        """Close the watch now and start no other; followers go on by reading."""
        self._stopping.set()
        with self._lock:
            stream, task = self._stream, self._task
            self._wake_all()
        if stream is not None:
            stream.cancel()
        if task is not None:
            task.join(5.0)

    @property
    def following(self) -> int:
        """Objects someone follows now."""
        with self._lock:
            return len(self._followers)

    @property
    def running(self) -> bool:
        """Whether the feed's task runs (it ends once no one follows)."""
        with self._lock:
            return self._task is not None

    @property
    def watching(self) -> bool:
        """Whether changes since the current start reach the followers."""
        with self._lock:
            return self._watching

    # The feed's task ----------------------------------------------------------------

    def _run(self) -> None:
        version: str | None = None
        failures = 0
        while self._carry_on():
            try:
                if version is None:
                    version = self._kube.tracked_version(
                        self.resource, self.selector, namespace=self._namespace
                    )
                    self._started()
                version = self._follow_one_request(version)
                failures = 0
            except WatchExpired:
                version = None
            except Exception as exc:
                # Whatever went wrong, the followers read their objects until a new start.
                version = None
                failures += 1
                self._lost()
                delay = min(_MAX_PAUSE_SECONDS, 0.5 * 2**failures)
                if isinstance(exc, KubernetesError):
                    logger.warning(
                        "%s feed lost its watch (%s); again in %gs", self.resource, exc, delay
                    )
                else:
                    logger.exception("%s feed failed; again in %gs", self.resource, delay)
                self._stopping.wait(delay)

    def _carry_on(self) -> bool:
        """Whether to watch on: someone follows. Otherwise the task ends here, under the
        lock, so that the next ``follow`` starts another."""
        with self._lock:
            if self._followers and not self._stopping.is_set():
                return True
            self._task = None
            self._watching = False
            self._wake_all()
            return False

    def _follow_one_request(self, version: str) -> str:
        """Read one watch request from ``version``; the last version seen."""
        stream = self._kube.open_tracked_watch(
            self.resource,
            self.selector,
            version,
            self._watch_seconds,
            namespace=self._namespace,
        )
        with self._lock:
            self.watch_requests += 1
            self._stream = stream
        if self._stopping.is_set():
            stream.cancel()
        try:
            for change, obj in stream:
                meta = obj.get("metadata") or {}
                if change != "BOOKMARK":
                    key = (meta.get("namespace") or "", meta.get("name") or "")
                    self._deliver(key, change, obj)
                version = str(meta.get("resourceVersion") or version)
        finally:
            with self._lock:
                self._stream = None
        return version

    def _started(self) -> None:
        with self._lock:
            self._start += 1
            self._watching = True
            self._wake_all()

    def _lost(self) -> None:
        with self._lock:
            self._watching = False
            self._wake_all()

    def _deliver(self, key: ObjectKey, change: str, obj: dict[str, Any]) -> None:
        with self._lock:
            for follower in self._followers.get(key, ()):
                follower.put(change, obj)

    def _wake_all(self) -> None:
        """Under the lock: every follower looks at the feed's state again."""
        for followers in self._followers.values():
            for follower in followers:
                follower.wake()

    # What followers ask, under the lock ---------------------------------------------

    def _current_start(self) -> int:
        """The start whose watch holds now; -1 while none does."""
        return self._start if self._watching else -1


class Follower:
    """One operation's subscription to one object's changes (``WatchFeed.follow``)."""

    def __init__(self, feed: WatchFeed, key: ObjectKey) -> None:
        self._feed = feed
        self.key = key
        self._queue: deque[tuple[str, dict[str, Any]]] = deque()
        self._overflowed = False
        self._ready = threading.Condition(feed._lock)
        self.seen_start = -1
        """The feed's start the follower's last read belongs to (-1: none held)."""
        self._heard = time.monotonic()
        """When the follower last read its object or was told of a change."""

    def changes(
        self, resource_version: str | None, timeout: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield ``(type, object)`` as the object changes, for ``timeout`` seconds, as a
        watch of the object from the caller's last read (at ``resource_version``) would.

        The version itself is not needed: the feed delivers whatever came after the
        subscription, which preceded the read. Raises ``FeedRestarted`` at once if the feed
        started over since the read, and at the end if it is not watching or nothing was
        heard of the object for the feed's ``resync_seconds``: read again."""
        del resource_version
        deadline = time.monotonic() + timeout
        while True:
            with self._ready:
                while not self._queue and not self._missed_changes():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._ready.wait(left)
                if self._missed_changes():
                    self._read_again()
                if not self._queue:
                    silent = time.monotonic() - self._heard
                    if self._feed._current_start() < 0 or silent >= self._feed.resync_seconds:
                        # No watch behind this wait (the caller reads, a timeout apart), or
                        # a long silence the caller checks with a read.
                        self._read_again()
                    return
                item = self._queue.popleft()
                self._heard = time.monotonic()
            yield item

    def _missed_changes(self) -> bool:
        start = self._feed._current_start()
        return self._overflowed or (start >= 0 and start != self.seen_start)

    def _read_again(self) -> None:
        self.seen_start = self._feed._current_start()
        self._queue.clear()
        self._overflowed = False
        self._heard = time.monotonic()
        raise FeedRestarted

    # From the feed, under its lock ----------------------------------------------------

    def put(self, change: str, obj: dict[str, Any]) -> None:
        if len(self._queue) >= QUEUE_LIMIT:
            self._overflowed = True
            self._queue.clear()
        else:
            self._queue.append((change, obj))
        self._ready.notify()

    def wake(self) -> None:
        self._ready.notify()


class WatchFeeds:
    """This process's feeds, one per resource, selector and namespace, made when first asked
    for; the web role never asks, so it never watches."""

    def __init__(self, kube: KubernetesStorage) -> None:
        self._kube = kube
        self._lock = threading.Lock()
        self._feeds: dict[tuple[str, str, str | None], WatchFeed] = {}
        self._stopped = False

    def feed(self, resource: str, selector: str, *, namespace: str | None = None) -> WatchFeed:
        key = (resource, selector, namespace)
        with self._lock:
            feed = self._feeds.get(key)
            if feed is None:
                feed = self._feeds[key] = WatchFeed(
                    self._kube, resource, selector, namespace=namespace
                )
                if self._stopped:
                    feed.stop()
            return feed

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            feeds = list(self._feeds.values())
        for feed in feeds:
            feed.stop()

"""One worker thread that runs every controller of the simulated cluster.

Store listeners run on the writer's thread, so they only enqueue work here. Running all
controllers on a single thread keeps their view of the cluster consistent without locks, and a
heap of due times serves every pending delay (image pulls, back-offs, grace periods) without a
thread per pod.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

Task = Callable[[], None]


class Timer:
    """A handle on a delayed task; cancelling it is cheap and safe from the reactor thread."""

    __slots__ = ("cancelled", "due", "task")

    def __init__(self, due: float, task: Task) -> None:
        self.due = due
        self.task = task
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Reactor:
    """Runs submitted tasks in order and delayed tasks at their due time (monotonic clock)."""

    def __init__(self, name: str = "kube-cluster") -> None:
        self._name = name
        self._cond = threading.Condition()
        self._ready: deque[Task] = deque()
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._stopping = False
        self._thread: threading.Thread | None = None

    @staticmethod
    def now() -> float:
        return time.monotonic()

    def start(self) -> None:
        with self._cond:
            self._stopping = False
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop after the task in progress; pending tasks and timers are dropped."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._thread = None
        with self._cond:
            self._ready.clear()
            self._timers.clear()

    def on_thread(self) -> bool:
        """Whether the caller runs on the reactor thread (and must not wait for it)."""
        return self._thread is threading.current_thread()

    def submit(self, task: Task) -> None:
        """Run ``task`` on the reactor thread after the tasks already queued."""
        with self._cond:
            self._ready.append(task)
            self._cond.notify()

    def call_at(self, due: float, task: Task) -> Timer:
        """Run ``task`` at monotonic time ``due``; equal due times run in scheduling order."""
        timer = Timer(due, task)
        with self._cond:
            heapq.heappush(self._timers, (due, next(self._seq), timer))
            self._cond.notify()
        return timer

    def call_later(self, delay: float, task: Task) -> Timer:
        return self.call_at(self.now() + max(0.0, delay), task)

    def _next_task(self) -> Task | None:
        with self._cond:
            while not self._stopping:
                now = self.now()
                while self._timers and self._timers[0][2].cancelled:
                    heapq.heappop(self._timers)
                if self._timers and self._timers[0][0] <= now:
                    return heapq.heappop(self._timers)[2].task
                if self._ready:
                    return self._ready.popleft()
                wait = self._timers[0][0] - now if self._timers else None
                self._cond.wait(wait)
            return None

    def _run(self) -> None:
        while (task := self._next_task()) is not None:
            try:
                task()
            except Exception:  # one broken object must not stop the whole cluster
                log.exception("cluster task failed")

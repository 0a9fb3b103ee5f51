"""How long the server has gone without a request: what its idle timeout is measured on."""

from __future__ import annotations

import threading
import time


class Activity:
    """Requests begun and ended, from any of the server's threads. A request in flight (a
    long upload, say) keeps the server busy; the idle time runs from the last one's end, or
    from the server's start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._last = time.monotonic()

    def begin(self) -> None:
        with self._lock:
            self._in_flight += 1

    def end(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._last = time.monotonic()

    def idle_seconds(self) -> float:
        with self._lock:
            return 0.0 if self._in_flight else time.monotonic() - self._last

    def wait_until_idle(self, timeout: float, stop: threading.Event) -> bool:
        """Block until the server has been idle for ``timeout`` seconds (True) or ``stop`` is
        set (False). It wakes only when the timeout would be reached, then looks again."""
        while True:
            remaining = timeout - self.idle_seconds()
            if remaining <= 0:
                return True
            if stop.wait(remaining):
                return False

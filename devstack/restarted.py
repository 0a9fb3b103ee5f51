"""A process started again whenever it exits, until it is stopped: what the kubelet does for
a container of a pod whose ``restartPolicy`` is ``Always``.

The service's runner is one plain process (``runner.py``), not a worker under a gunicorn
master that would fork a new one: in a cluster its container is restarted by the kubelet,
so the local stack restarts it the same way. A process that exits by itself soon after it
started (a bad configuration) waits before its next start, longer each time up to
``MAX_BACKOFF_SECONDS``, as the kubelet's crash-loop back-off does. Unlike the kubelet, one
killed by a signal, or that ran ``STEADY_SECONDS``, is started again at once: the tests kill
runners on purpose, one after another, to see their work resumed.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable

FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 10.0
STEADY_SECONDS = 10.0
"""A process that ran this long is started again at once when it exits."""


class RestartedProcess:
    """The process ``start`` makes, made again by ``start`` each time it exits."""

    def __init__(self, start: Callable[[], subprocess.Popen[bytes]]) -> None:
        self._start = start
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.restarts = 0
        self.process = start()
        """The run under way (or the last one, once stopped)."""
        # The thread that starts each run must outlive it: the launcher ties a run's life to
        # the thread that started it (``devstack.launch``), so every run starts here.
        self._watcher = threading.Thread(target=self._watch, name="restarter", daemon=True)
        self._watcher.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def poll(self) -> int | None:
        """None while it runs or is to be started again; its last exit code once stopped."""
        if not self._stopping.is_set():
            return None
        return self.process.poll()

    def terminate(self) -> None:
        self._signal(subprocess.Popen.terminate)

    def kill(self) -> None:
        self._signal(subprocess.Popen.kill)

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code, once stopped (``terminate`` or ``kill``) and exited."""
        code = self.process.wait(timeout=timeout)
        self._watcher.join(timeout)
        return code

    def _signal(self, send: Callable[[subprocess.Popen[bytes]], None]) -> None:
        with self._lock:
            self._stopping.set()
            process = self.process
        if process.poll() is None:
            send(process)

    def _watch(self) -> None:
        backoff = 0.0
        while True:
            started = time.monotonic()
            code = self.process.wait()
            if code < 0 or time.monotonic() - started >= STEADY_SECONDS:
                backoff = 0.0  # killed, or it had been running: not a crash loop
            if self._stopping.wait(backoff):
                return
            if code >= 0:
                backoff = min(MAX_BACKOFF_SECONDS, max(FIRST_BACKOFF_SECONDS, backoff * 2))
            with self._lock:
                if self._stopping.is_set():
                    return
                self.process = self._start()
                self.restarts += 1

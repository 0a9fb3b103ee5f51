"""The local stack's stand-in for the kubelet's restarts (``devstack.restarted``): a process
started again whenever it exits, until it is stopped, with a back-off for one that keeps
failing by itself."""

from __future__ import annotations

import signal
import subprocess
import sys

from devstack.restarted import RestartedProcess
from tests.labs.conftest import wait_for


def _starter(code: str) -> tuple[list[subprocess.Popen[bytes]], RestartedProcess]:
    runs: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        runs.append(subprocess.Popen([sys.executable, "-c", code]))
        return runs[-1]

    return runs, RestartedProcess(start)


def test_a_killed_process_is_started_again_until_it_is_stopped() -> None:
    runs, process = _starter("import time; time.sleep(60)")
    try:
        first = process.pid
        runs[0].send_signal(signal.SIGKILL)
        wait_for(lambda: process.restarts == 1 and process.pid != first, timeout=10)
        assert process.poll() is None  # to be started again: still running
        assert runs[0].returncode == -signal.SIGKILL
        runs[1].send_signal(signal.SIGKILL)
        wait_for(lambda: process.restarts == 2, timeout=10)
    finally:
        process.terminate()
    assert process.wait(timeout=10) == -signal.SIGTERM
    assert process.poll() == -signal.SIGTERM
    assert [run.poll() for run in runs] == [-signal.SIGKILL] * 2 + [-signal.SIGTERM]
    assert process.restarts == 2  # stopped: no run after the last


def test_a_process_that_keeps_failing_waits_longer_each_time() -> None:
    runs, process = _starter("raise SystemExit(3)")
    try:
        # At once, then after 0.5 s, then after 1 s: three restarts in about 1.5 s, not a
        # hot loop of hundreds.
        wait_for(lambda: process.restarts >= 3, timeout=10)
        assert process.restarts < 6
        assert runs[0].wait(timeout=5) == 3
    finally:
        process.kill()
    process.wait(timeout=10)
    restarts = process.restarts
    assert len(runs) == restarts + 1

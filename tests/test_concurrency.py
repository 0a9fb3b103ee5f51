"""Independent calls at once, and background tasks, with threads and under gevent."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from app.concurrency import concurrently


def test_concurrently_returns_results_in_order() -> None:
    assert concurrently(lambda: 1, lambda: "two", lambda: [3]) == [1, "two", [3]]


def test_concurrently_raises_the_first_error_once_every_call_ended() -> None:
    ended: list[str] = []
    release = threading.Event()

    def slow_success() -> str:
        release.wait(5)
        ended.append("slow")
        return "ok"

    def first_failure() -> None:
        release.set()
        ended.append("first")
        raise ValueError("first")

    def second_failure() -> None:
        ended.append("second")
        raise KeyError("second")

    with pytest.raises(ValueError, match="first"):
        concurrently(slow_success, first_failure, second_failure)
    assert sorted(ended) == ["first", "second", "slow"]


_UNDER_GEVENT = """
from gevent import monkey
monkey.patch_all()
import json
import gevent
from app.concurrency import concurrently, start_task

ran = []
task = start_task(ran.append, "task", name="t")
found = {"is_greenlet": isinstance(task, gevent.Greenlet), "ran_before_join": ran == ["task"]}
task.join()
found["ran_after_join"] = ran == ["task"]
found["concurrently"] = concurrently(lambda: gevent.sleep(0.01) or 1, lambda: 2)
print(json.dumps(found))
"""


def test_under_gevent_tasks_are_greenlets_that_run_once_the_caller_waits() -> None:
    """``start_task`` returns at once with a greenlet scheduled; the caller's next wait
    runs it, and ``concurrently`` collects greenlets' results in order."""
    done = subprocess.run(
        [sys.executable, "-c", _UNDER_GEVENT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "is_greenlet": True,
        "ran_before_join": False,
        "ran_after_join": True,
        "concurrently": [1, 2],
    }

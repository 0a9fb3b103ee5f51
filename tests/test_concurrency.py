"""The scheduling helpers: calls at once, and stepping aside for other work under gevent."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from app.services.concurrency import concurrently


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
import json, socket
import gevent
from app.services import concurrency

found = {}
ran = []
concurrency.start_task(ran.append, "task", name="t")
concurrency.give_way()
found["task_ran_before_give_way_returned"] = ran == ["task"]

for label, step in (("give_way", concurrency.give_way), ("yield_to_io", concurrency.yield_to_io)):
    reader, writer = socket.socketpair()
    seen = []
    gevent.spawn(lambda: seen.append(reader.recv(10)))
    gevent.sleep(0.01)  # the reader now waits on its socket
    writer.send(b"ready")
    step()
    found[label] = bool(seen)
    gevent.sleep(0.01)
print(json.dumps(found))
"""


def test_under_gevent_only_yield_to_io_lets_ready_sockets_go_first() -> None:
    """``give_way`` runs tasks started just now, but the caller comes back before the loop
    looks at sockets; ``yield_to_io`` lets a greenlet whose data has arrived run first."""
    done = subprocess.run(
        [sys.executable, "-c", _UNDER_GEVENT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "task_ran_before_give_way_returned": True,
        "give_way": False,
        "yield_to_io": True,
    }

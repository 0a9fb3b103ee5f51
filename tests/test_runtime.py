"""The server's runtime tuning (``app.runtime``): what it does, the versions it refuses, and
that it stays a ground floor the arbiter can load before any worker imports the app.

What changes the process for good (freezing the collector) runs in a fresh interpreter, so
the test process keeps its own.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger
from gunicorn.workers.ggevent import PyWSGIServer

from app.runtime.collector import THRESHOLDS, collector_paused, thresholds_checked
from app.runtime.worker import (
    OneAtATimeServer,
    SpawnerWorker,
    TurnTakingHandler,
    unchecked_versions,
)
from app.storage.kubernetes import LARGE_BODY_BYTES, parse_body

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return completed.stdout.strip()


@pytest.fixture
def collector_running() -> Iterator[None]:
    """The collector enabled for the test, and enabled again after it, whatever it did."""
    gc.enable()
    yield
    gc.enable()


def test_collector_paused_pauses_a_running_collector_and_restarts_it(
    collector_running: None,
) -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("the block failed")
    assert gc.isenabled()


def test_collector_paused_leaves_a_paused_collector_paused(collector_running: None) -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def _collections_during(parse: Any, data: bytes) -> tuple[Any, int]:
    """What ``parse(data)`` returned, and how many collections started while it ran (after
    a collection of its own, so that none is due from what was allocated before)."""
    started = []
    gc.collect()

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(note)
    try:
        parsed = parse(data)
    finally:
        gc.callbacks.remove(note)
    return parsed, len(started)


def test_a_large_body_is_parsed_with_the_collector_paused(collector_running: None) -> None:
    # Hundreds of thousands of lists, as a large pod list's dicts and lists.
    data = json.dumps([[index] for index in range(250_000)]).encode()
    assert len(data) >= LARGE_BODY_BYTES
    parsed, collections = _collections_during(json.loads, data)
    assert collections > 100, "the plain parse sets off collections: the check below can fail"
    parsed, collections = _collections_during(parse_body, data)
    # At most the one that is due when the collector resumes, as the parse ends.
    assert collections <= 1
    assert parsed[-1] == [249_999]
    assert gc.isenabled()


def test_the_thresholds_apply_only_on_the_measured_interpreter() -> None:
    assert thresholds_checked((3, 11))
    assert not thresholds_checked((3, 14))


def test_a_worker_freezes_its_start_up_objects_and_collects_less_often() -> None:
    code = """
import gc, json
from app import runtime
defaults = gc.get_threshold()
runtime.after_worker_init()
print(json.dumps([gc.get_freeze_count(), gc.get_threshold(), defaults]))
"""
    frozen, thresholds, defaults = json.loads(_run(code))
    assert frozen > 0
    assert tuple(thresholds) == (THRESHOLDS if thresholds_checked() else tuple(defaults))
    assert tuple(defaults) != THRESHOLDS


def _worker(workers: int, keepalive: int) -> SpawnerWorker:
    config = Config()
    config.set("workers", workers)
    config.set("keepalive", keepalive)
    return SpawnerWorker(0, os.getpid(), [], None, 30, config, Logger(config))


def test_the_installed_gunicorn_and_gevent_are_checked() -> None:
    """The real-server tests (``tests/stack/test_worker.py``) then test the turn-taking."""
    assert unchecked_versions() == []
    assert unchecked_versions({"gunicorn": "28.0.0", "gevent": "26.9.0"}) == ["gunicorn 28.0.0"]
    assert unchecked_versions({"gunicorn": "27.0.1"}) == ["gevent (not installed)"]


@pytest.mark.parametrize(("workers", "server"), [(1, PyWSGIServer), (2, OneAtATimeServer)])
def test_the_worker_takes_turns_with_its_keepalive(workers: int, server: type) -> None:
    worker = _worker(workers, keepalive=3)
    try:
        assert issubclass(worker.wsgi_handler, TurnTakingHandler)
        assert worker.wsgi_handler.idle_seconds == 3.0
        assert worker.server_class is server
    finally:
        worker.tmp.close()


def test_the_runtime_package_imports_nothing_of_the_app() -> None:
    """gunicorn's arbiter imports the settings and the worker class before forking: nothing
    of the app above the package, and no network library gevent has not patched yet."""
    code = """
import sys
import app.runtime, app.runtime.defaults, app.runtime.worker
print(" ".join(sorted(m for m in sys.modules if m == "app" or m.startswith(
    ("app.", "blueprints", "flask", "kubernetes", "redis", "requests", "urllib3")))))
"""
    assert _run(code).split() == [
        "app",
        "app.runtime",
        "app.runtime.collector",
        "app.runtime.cpus",
        "app.runtime.defaults",
        "app.runtime.worker",
    ]

"""The cyclic garbage collector, kept out of the way of a worker's streams and large parses.

Start-up objects are frozen (``freeze_startup_objects``). Importing the Kubernetes client,
pydantic, Flask and the app leaves about 300,000 long-lived objects, and every full
collection walked them all: in a worker holding 2,000 event streams (the ``streams``
benchmark) that paused it for 150-300 ms at a time. ``gc.freeze`` moves them to a permanent
generation the collector skips. The objects of open streams then still made full collections
of 50-120 ms every few seconds under load, so every generation is also collected less often:
cyclic garbage is still collected, in larger batches. With both, ``streams`` delivers one
event to each of 2,000 streams in one worker with a p99 of 98.4 ms (``bench/RESULTS.md``,
"Event streams: 2000 in one worker").

Large parses run with the collector paused (``collector_paused``). Parsing a list of 10,000
pods (70 MB) creates millions of containers, each batch of which sets off a collection that
walks everything alive: the ``scale`` benchmark measured the parse at 1.3 s for 10,000 pods
against 0.04 s for 1,000, and 0.36 s with the collector paused; pausing it took the
reconcile's CPU at 10,000 labs from 3.3 to 2.6 s and the watcher's start from 4.7 to 2.9 s
(``docs/developer/benchmarks.md``, "Scale").

The version guard: ``gc.freeze`` and pausing are the collector's documented interface, but
what the thresholds mean is the interpreter's. They were measured on CPython 3.11's
three-generation collector; the incremental collector of later versions (3.14) reads the
same three numbers differently (two generations, the second number a scan rate, the third
ignored). On a version not in ``CHECKED_PYTHON_VERSIONS`` the thresholds are left at the
interpreter's defaults until ``streams`` has been run on it.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 20_000
"""Allocations between young collections (Python's default is 700)."""

THRESHOLDS = (YOUNG_THRESHOLD, 50, 100)
"""The three thresholds a worker collects at, measured with the ``streams`` benchmark
(Python's defaults are 700, 10, 10)."""

CHECKED_PYTHON_VERSIONS = frozenset({(3, 11)})
"""CPython versions (major, minor) on which ``THRESHOLDS`` were measured."""


def thresholds_checked(version: tuple[int, int] | None = None) -> bool:
    """Whether ``THRESHOLDS`` mean on this interpreter (or on CPython ``version``) what
    they were measured to mean."""
    if version is None:
        if sys.implementation.name != "cpython":
            return False
        version = (sys.version_info.major, sys.version_info.minor)
    return version in CHECKED_PYTHON_VERSIONS


def freeze_startup_objects() -> None:
    """Move everything alive now out of the collector's reach, and collect less often.

    Called in gunicorn's master once the app is built, and in each worker once its
    background work started: what they made then is what stays. Frozen before the fork,
    the master's objects are never written by a worker's collections, so the pages holding
    them stay shared (a collection writes to every object it walks); freezing again in a
    worker moves only what the worker made since.
    """
    gc.collect()
    gc.freeze()
    if thresholds_checked():
        gc.set_threshold(*THRESHOLDS)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic collector paused, for work that makes many containers
    and no reference cycles (parsing JSON): pausing frees nothing later than it would be.

    A collector already paused (by a caller further out, or a test) is left paused; one
    that was running runs again as soon as the block ends, however it ends.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()

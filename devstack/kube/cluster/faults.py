"""Injected pod failures: image pulls that fail, pods that cannot be scheduled, crash loops.

A service under test must fail fast on these instead of waiting for its timeout, so tests
switch them on by pattern and the simulation consults them at the moment it would succeed.
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Callable
from dataclasses import dataclass

FAULT_KINDS = ("image_pull", "unschedulable", "crash_loop")


@dataclass(frozen=True)
class Fault:
    """One injected fault: ``pattern`` is an fnmatch pattern, ``message`` overrides the default."""

    kind: str
    pattern: str
    message: str | None = None
    node: str | None = None
    """When set, the fault happens on this node only (``image_pull``)."""


class PodFaults:
    """Thread-safe registry of active faults; tests write it, the simulation reads it.

    ``image_pull`` and ``crash_loop`` match the container image; ``unschedulable`` matches
    ``namespace/podname``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._listeners: list[Callable[[], None]] = []

    def set(
        self, kind: str, pattern: str, message: str | None = None, *, node: str | None = None
    ) -> None:
        """Activate a fault (on ``node`` only, if given); later faults of the same kind,
        pattern and node replace earlier ones."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {FAULT_KINDS}")
        with self._lock:
            self._faults = [
                f for f in self._faults if (f.kind, f.pattern, f.node) != (kind, pattern, node)
            ]
            self._faults.append(Fault(kind, pattern, message, node))
        self._changed()

    def clear(self, kind: str | None = None) -> None:
        """Remove every fault, or every fault of one kind."""
        with self._lock:
            self._faults = [f for f in self._faults if kind is not None and f.kind != kind]
        self._changed()

    def match(self, kind: str, subject: str, node: str | None = None) -> Fault | None:
        """The most recently set fault of ``kind`` whose pattern matches ``subject`` (and
        whose node, if it names one, is ``node``)."""
        with self._lock:
            faults = list(self._faults)
        for fault in reversed(faults):
            if fault.node is not None and fault.node != node:
                continue
            if fault.kind == kind and fnmatch.fnmatchcase(subject, fault.pattern):
                return fault
        return None

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every change, so waiting pods are reconsidered at once."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()

"""The audit log: one entry per HTTP request, in Kubernetes terms.

Tests use it to prove what the service asked of the cluster (which verbs, how many calls,
with which user agent), e.g. that status reads never reach the API server. It is a bounded
ring buffer so recording costs the same on the millionth request as on the first.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class AuditEntry:
    """One request. ``verb`` is the Kubernetes verb (get, list, watch, create, update,
    patch, delete, deletecollection), not the HTTP method; ``api_group`` is "" for core."""

    verb: str
    api_group: str
    api_version: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    user_agent: str
    path: str
    timestamp: float
    """When the answer was ready (``time.time()``)."""
    started: float = 0.0
    """When the emulator began handling the request: ``timestamp - started`` is the
    emulator's own time for it, without the client's or the connection's."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SINKS: list[Callable[[AuditEntry], None]] = []
"""Called with every entry of every emulator in the process: how the test suite gathers the
whole run's traffic (the RBAC proof) though each test starts emulators of its own."""


class AuditLog:
    """Thread-safe, bounded record of requests."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._entries: deque[AuditEntry] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    def record(self, entry: AuditEntry) -> None:
        with self._lock:
            self._entries.append(entry)
        for sink in SINKS:
            sink(entry)

    def entries(self, **match: str | int) -> list[AuditEntry]:
        """Entries in request order, optionally only those whose fields equal ``match``,
        e.g. ``entries(verb="create", resource="pods")``."""
        with self._lock:
            snapshot = list(self._entries)
        if not match:
            return snapshot
        return [e for e in snapshot if all(getattr(e, k) == v for k, v in match.items())]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def now() -> float:
    return time.time()

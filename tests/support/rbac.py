"""What the service asked of Kubernetes during the whole test run, for the RBAC proof.

Every emulator in the test process reports each request to ``devstack.kube.audit.SINKS``; the
ones the service made (its ``User-Agent``) are kept here as RBAC terms: API group, resource
(with ``/subresource``), verb and namespace ("" for cluster-scoped or all-namespace calls).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from app.storage.kubernetes_client import USER_AGENT
from devstack.kube.audit import SINKS, AuditEntry


@dataclass(frozen=True)
class Call:
    api_group: str
    resource: str
    verb: str
    namespace: str


class CallRecorder:
    """A set of distinct calls, fed by the emulators' audit logs."""

    def __init__(self) -> None:
        self.calls: set[Call] = set()
        self._lock = threading.Lock()

    def __call__(self, entry: AuditEntry) -> None:
        if not entry.user_agent.startswith(USER_AGENT) or not entry.resource:
            return  # another client, or a non-resource URL (/version, discovery)
        resource = entry.resource + (f"/{entry.subresource}" if entry.subresource else "")
        call = Call(entry.api_group, resource, entry.verb, entry.namespace)
        with self._lock:
            self.calls.add(call)

    def install(self) -> None:
        SINKS.append(self)

    def uninstall(self) -> None:
        if self in SINKS:
            SINKS.remove(self)


RECORDER = CallRecorder()
"""The test session's recorder (installed by ``tests/conftest.py``)."""

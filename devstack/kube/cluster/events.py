"""core/v1 Events, written as the scheduler, kubelets and controllers write them.

A spawner shows these to users as progress ("Pulling image ...") and reads Warning events to
fail fast, so they carry the fields ``kubectl describe`` shows. A repeat of the same event about
the same object bumps ``count`` and ``lastTimestamp`` instead of adding another object.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .cache import Obj
from .clock import now_rfc3339
from .writer import StoreWriter

_MAX_REMEMBERED = 20_000


@dataclass(frozen=True)
class Source:
    """Who reports an event: ``component`` and, for kubelets, the node."""

    component: str
    host: str = ""


SCHEDULER = Source("default-scheduler")
DAEMONSET_CONTROLLER = Source("daemonset-controller")


def kubelet(node: str) -> Source:
    return Source("kubelet", node)


class EventRecorder:
    """Creates Events in the namespace of the object they are about, aggregating repeats."""

    def __init__(self, writer: StoreWriter, namespace_alive: Callable[[str], bool]) -> None:
        self._writer = writer
        self._namespace_alive = namespace_alive
        self._names: OrderedDict[tuple[str, ...], str] = OrderedDict()
        self._last_suffix = 0

    def normal(
        self, about: Obj, source: Source, reason: str, message: str, field_path: str = ""
    ) -> None:
        self.record(about, source, "Normal", reason, message, field_path)

    def warning(
        self, about: Obj, source: Source, reason: str, message: str, field_path: str = ""
    ) -> None:
        self.record(about, source, "Warning", reason, message, field_path)

    def record(
        self, about: Obj, source: Source, kind: str, reason: str, message: str, field_path: str = ""
    ) -> None:
        meta = about.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        if not self._namespace_alive(namespace):
            return
        key = (namespace, str(meta.get("uid")), source.component, kind, reason, message, field_path)
        now = now_rfc3339()
        existing = self._names.get(key)
        if existing is not None and self._bump(namespace, existing, now):
            self._names.move_to_end(key)
            return
        event = self._build(about, source, kind, reason, message, field_path, now)
        created = self._writer.create("events", event)
        if created is not None:
            self._names[key] = created["metadata"]["name"]
            if len(self._names) > _MAX_REMEMBERED:
                self._names.popitem(last=False)

    def _bump(self, namespace: str, name: str, now: str) -> bool:
        def bump(event: Obj) -> bool:
            event["count"] = int(event.get("count") or 1) + 1
            event["lastTimestamp"] = now
            return True

        return self._writer.mutate("events", namespace, name, bump) is not None

    def _build(
        self,
        about: Obj,
        source: Source,
        kind: str,
        reason: str,
        message: str,
        field_path: str,
        now: str,
    ) -> Obj:
        meta = about.get("metadata") or {}
        involved: dict[str, Any] = {
            "kind": about.get("kind") or "Pod",
            "apiVersion": about.get("apiVersion") or "v1",
            "namespace": meta.get("namespace") or "default",
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        }
        if field_path:
            involved["fieldPath"] = field_path
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name')}.{self._suffix()}",
                "namespace": involved["namespace"],
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {
                "component": source.component,
                **({"host": source.host} if source.host else {}),
            },
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": source.component,
            "reportingInstance": source.host,
        }

    def _suffix(self) -> str:
        """Hex nanoseconds like a real event name, kept strictly increasing so names never clash."""
        value = max(time.time_ns(), self._last_suffix + 1)
        self._last_suffix = value
        return f"{value:x}"

"""The default scheduler: binds each pending pod to a node that passes every filter.

A pod that fits nowhere gets ``PodScheduled=False`` with the reasons a real scheduler gives
and a ``FailedScheduling`` event, and is tried again whenever nodes, pods or faults change,
so a service waiting on it sees the same sequence it would see in a real cluster.
"""

from __future__ import annotations

from collections import Counter

from . import nodes
from .cache import Obj, ObjectCache
from .events import SCHEDULER, EventRecorder
from .faults import PodFaults
from .placement import rejections, unschedulable_message
from .podstatus import pod_key, set_condition
from .writer import StoreWriter

SCHEDULER_NAME = "default-scheduler"


def needs_scheduling(pod: Obj) -> bool:
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    return (
        not spec.get("nodeName")
        and not meta.get("deletionTimestamp")
        and (spec.get("schedulerName") or SCHEDULER_NAME) == SCHEDULER_NAME
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
    )


class Scheduler:
    """Places pods; remembers the last failure per pod so retries only write on a change."""

    def __init__(
        self, cache: ObjectCache, writer: StoreWriter, events: EventRecorder, faults: PodFaults
    ) -> None:
        self._cache = cache
        self._writer = writer
        self._events = events
        self._faults = faults
        self._failures: dict[str, str] = {}

    def on_pod(self, event_type: str, pod: Obj) -> None:
        uid = str(pod["metadata"].get("uid"))
        if event_type == "DELETED":
            self._failures.pop(uid, None)
            if self._failures:
                self.retry_all()  # the pod's resources are free again
            return
        if (pod.get("spec") or {}).get("nodeName"):
            self._failures.pop(uid, None)
            return
        if needs_scheduling(pod):
            self.schedule(pod)

    def retry_all(self) -> None:
        """Try every pending pod again: nodes, faults or free resources have changed."""
        for pod in sorted(
            self._cache.all("pods"), key=lambda p: p["metadata"].get("creationTimestamp") or ""
        ):
            if needs_scheduling(pod):
                self.schedule(pod)

    def schedule(self, pod: Obj) -> None:
        fault = self._faults.match("unschedulable", pod_key(pod))
        all_nodes = sorted(self._cache.all("nodes"), key=nodes.node_name)
        if fault is not None:
            count = len(all_nodes)
            self._fail(
                pod, fault.message or unschedulable_message(count, {"Insufficient memory": count})
            )
            return
        uid = pod["metadata"].get("uid")
        used: dict[str, list[dict[str, object]]] = {nodes.node_name(n): [] for n in all_nodes}
        for other in self._cache.all("pods"):
            node = (other.get("spec") or {}).get("nodeName")
            if (
                node in used
                and other["metadata"].get("uid") != uid
                and (other.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ):
                used[node].append(other.get("spec") or {})
        reasons: Counter[str] = Counter()
        feasible: list[tuple[int, str]] = []
        spec = pod.get("spec") or {}
        for node in all_nodes:
            name = nodes.node_name(node)
            rejected = rejections(spec, node, used[name])
            if rejected:
                reasons.update(rejected)
            else:
                feasible.append((len(used[name]), name))
        if not feasible:
            self._fail(pod, unschedulable_message(len(all_nodes), dict(reasons)))
            return
        self._bind(pod, min(feasible)[1])

    def _bind(self, pod: Obj, node: str) -> None:
        meta = pod["metadata"]
        bound: list[bool] = []

        def bind(current: Obj) -> bool:
            if (current.get("spec") or {}).get("nodeName") or current["metadata"].get(
                "deletionTimestamp"
            ):
                return False
            bound.append(True)
            current.setdefault("spec", {})["nodeName"] = node
            status = current.setdefault("status", {})
            status.setdefault("phase", "Pending")
            set_condition(status, "PodScheduled", True)
            return True

        updated = self._writer.mutate(
            "pods", meta.get("namespace"), meta["name"], bind, uid=meta.get("uid")
        )
        self._failures.pop(str(meta.get("uid")), None)
        if updated is not None and bound:
            self._events.normal(
                updated, SCHEDULER, "Scheduled", f"Successfully assigned {pod_key(pod)} to {node}"
            )

    def _fail(self, pod: Obj, message: str) -> None:
        meta = pod["metadata"]
        uid = str(meta.get("uid"))
        if self._failures.get(uid) == message:
            return
        self._failures[uid] = message

        def mark(current: Obj) -> bool:
            if (current.get("spec") or {}).get("nodeName"):
                return False
            status = current.setdefault("status", {})
            status["phase"] = "Pending"
            set_condition(status, "PodScheduled", False, "Unschedulable", message)
            return True

        marked: list[bool] = []

        def mark_once(current: Obj) -> bool:
            changed = mark(current)
            marked.append(changed)
            return changed

        updated = self._writer.mutate(
            "pods", meta.get("namespace"), meta["name"], mark_once, uid=meta.get("uid")
        )
        if updated is not None and marked and marked[-1]:
            self._events.warning(updated, SCHEDULER, "FailedScheduling", message)

"""Bring Redis back in line with Kubernetes: every workload of every tracked kind at once.

One rule makes this safe against operations running on other workers: read Redis first,
then Kubernetes, then write with ``WorkloadStore.put_if_idle`` expecting what was read. Any
operation that starts or finishes after the Redis read changes the record or holds the
operation key, so the write is refused and the operation's own outcome stands.

A run that reaches its end declares Redis complete (``WorkloadStore.mark_complete``): every
workload Kubernetes has is then recorded, so a missing record means "none" again.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any

from app.concurrency import concurrently
from app.engine.kind import WorkloadKind
from app.engine.tracking import Ending, WorkloadTracking
from app.models.workload import WorkloadRef
from app.storage.kubernetes import KubernetesStorage
from app.storage.leader import Fence
from app.storage.workloads import IdleWrite, WorkloadStore
from app.timestamps import iso_utc

logger = logging.getLogger(__name__)


def is_deleting(obj: dict[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def log_repair(ref: WorkloadRef, record: str, *, by: logging.Logger) -> None:
    """Say, in ``by``'s log, what a repair wrote: the record's status, and its error if it
    has one. A warning when the workload failed; otherwise (a kernel that exited after its
    shutdown request, a record rebuilt) it is news, not trouble."""
    fields = json.loads(record)
    error = fields.get("error")
    by.log(
        logging.WARNING if error or fields.get("status") == "failed" else logging.INFO,
        "%s is now %s: %s",
        ref.key,
        fields.get("status"),
        error or "in step with Kubernetes",
    )


def tracked(kinds: Iterable[WorkloadKind]) -> list[tuple[str, WorkloadTracking]]:
    """The kinds whose records follow their pods, with how."""
    return [(kind.name, kind.tracking) for kind in kinds if kind.tracking is not None]


def _repair(
    ref: WorkloadRef, tracking: WorkloadTracking, record: str | None, pod: dict[str, Any] | None
) -> list[IdleWrite]:
    """The write that brings ``ref``'s record in line with its pod, if one is needed."""
    if record is None:
        assert pod is not None
        rebuilt = tracking.rebuild(pod)
        return [] if rebuilt is None else [IdleWrite(ref, rebuilt, None)]
    update = tracking.assess(record, pod)
    return [] if update is None else [IdleWrite(ref, update, record)]


class Reconciler:
    """Compares all of Redis with all of Kubernetes and repairs the difference.

    One instance lives for one leadership tenure: the namespaces it suspects of being
    leaked are remembered between its runs, and only a namespace suspected by two
    consecutive runs is deleted, so a namespace caught between a spawn's first steps and
    its record is never removed. Its writes carry the tenure's ``fence``, so they are
    refused (``LeadershipLost``) once another worker leads.
    """

    def __init__(
        self,
        store: WorkloadStore,
        kube: KubernetesStorage,
        kinds: Iterable[WorkloadKind],
        *,
        fence: Fence | None = None,
        end: Ending | None = None,
    ) -> None:
        """``end``: how a workload that ended by itself is deleted (``Engine.end``)."""
        self._store = store
        self._fence = fence
        self._end = end
        self._kube = kube
        self._tracked = tracked(kinds)
        self._suspects: dict[str, set[str]] = {}

    @property
    def suspects(self) -> frozenset[str]:
        """Namespaces seen leaked once, to be deleted if the next run sees them again."""
        return frozenset(name for names in self._suspects.values() for name in names)

    def run(self, *, rebuild_ttl_seconds: float = 600.0) -> bool:
        """Reconcile every tracked kind; True when Redis was then declared complete (False
        when it was emptied meanwhile: the next run rebuilds what was lost)."""
        rebuild_id = uuid.uuid4().hex
        self._store.begin_rebuild(rebuild_id, rebuild_ttl_seconds)
        pending = self._store.pending()
        for kind, tracking in self._tracked:
            self._run_kind(kind, tracking, {ref.name for ref in pending if ref.kind == kind})
        finished = iso_utc(time.time()) or ""
        complete = self._store.mark_complete(
            rebuild_id=rebuild_id, finished=finished, fence=self._fence
        )
        if not complete:
            logger.warning("Redis was emptied during a reconcile; rebuilding again")
        return complete

    def _run_kind(self, kind: str, tracking: WorkloadTracking, busy: set[str]) -> None:
        # Redis first, then Kubernetes (see the module docstring).
        records = self._store.records(kind)
        try:
            (pods, _), namespaces, _ = concurrently(
                lambda: self._kube.list_tracked(
                    tracking.resource, tracking.selector, namespace=tracking.namespace
                ),
                lambda: self._kube.list_lab_namespaces() if tracking.owns_namespaces else [],
                tracking.prepare,
            )
            self._judge_kind(kind, tracking, busy, records, pods, namespaces)
        finally:
            tracking.release()

    def _judge_kind(
        self,
        kind: str,
        tracking: WorkloadTracking,
        busy: set[str],
        records: dict[str, str],
        pods: list[dict[str, Any]],
        namespaces: list[dict[str, Any]],
    ) -> None:
        pods_by_name: dict[str, dict[str, Any]] = {}
        for pod in pods:
            name = tracking.owner(pod)
            if name is not None:
                pods_by_name[name] = pod
        writes: list[IdleWrite] = []
        for name, pod in pods_by_name.items():
            if name in busy:
                continue
            if not is_deleting(pod) and tracking.orphaned(pod):
                meta = pod["metadata"]
                logger.warning(
                    "deleting pod %s/%s: it serves no one", meta["namespace"], meta["name"]
                )
                self._kube.delete_pod(meta["namespace"], meta["name"])
                continue
            if self._ended(WorkloadRef(kind, name), tracking, records.get(name), pod):
                continue
            writes.extend(_repair(WorkloadRef(kind, name), tracking, records.get(name), pod))
        for name, record in records.items():
            if name in busy or name in pods_by_name:
                continue
            if not self._ended(WorkloadRef(kind, name), tracking, record, None):
                writes.extend(_repair(WorkloadRef(kind, name), tracking, record, None))
        written = self._store.put_many_if_idle(writes=writes, fence=self._fence)
        rebuilt = 0
        for write, done in zip(writes, written, strict=True):
            if done and write.expect is None:
                rebuilt += 1
            elif done:
                log_repair(write.ref, write.record, by=logger)
        if rebuilt:
            logger.info("rebuilt the lost records of %d %s workloads", rebuilt, kind)
        if tracking.owns_namespaces:
            accounted = set(records) | busy | set(pods_by_name)
            self._collect_leaks(kind, tracking, namespaces, accounted)

    def _ended(
        self,
        ref: WorkloadRef,
        tracking: WorkloadTracking,
        record: str | None,
        pod: dict[str, Any] | None,
    ) -> bool:
        """Whether the workload ended by itself, its deletion then queued; a workload Redis
        forgot is rebuilt first, and ended on the next run."""
        if record is None or self._end is None:
            return False
        reason = tracking.ended(record, pod)
        if reason is None:
            return False
        self._end(ref, reason=reason)
        return True

    def _collect_leaks(
        self,
        kind: str,
        tracking: WorkloadTracking,
        namespaces: list[dict[str, Any]],
        accounted: set[str],
    ) -> None:
        seen: dict[str, str] = {}
        for namespace in namespaces:
            name = tracking.owner(namespace)
            if name is None or name in accounted or is_deleting(namespace):
                continue
            seen[namespace["metadata"]["name"]] = name
        suspects = self._suspects.get(kind, set())
        doomed = set(seen) & suspects
        self._suspects[kind] = set(seen) - doomed
        for leaked in sorted(doomed):
            ref = WorkloadRef(kind, seen[leaked])
            # A spawn may have begun since this run read Redis: look once more.
            found = self._store.record_and_busy(ref)
            if found.record is not None or found.busy:
                continue
            logger.warning("deleting namespace %s: no record or operation uses it", leaked)
            self._kube.delete_namespace(leaked)

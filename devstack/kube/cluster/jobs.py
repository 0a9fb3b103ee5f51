"""The Job controller: runs a Job's pods to completion and says in ``status`` how it ended.

A client that starts work as a Job waits for its ``Complete`` or ``Failed`` condition and then
cleans up, so those are written as Kubernetes 1.33 writes them: first the interim
``SuccessCriteriaMet`` (reason ``CompletionsReached``) or ``FailureTarget``
(``BackoffLimitExceeded``, ``DeadlineExceeded``), then, once no pod of the Job is still
running or terminating, ``Complete`` with ``completionTime`` or ``Failed`` with the same reason,
and the ``Completed`` or Warning Event. Pods are made ``<job>-<5 chars>`` with the
``batch.kubernetes.io/job-tracking`` finalizer, which the controller removes once it has
counted the pod in ``succeeded`` or ``failed`` (a pod deleted before it finished counts as
failed); a failed pod is replaced after a back-off that doubles with each failure in a row,
until ``backoffLimit`` is passed (for ``restartPolicy: OnFailure``, until the pods' restarts
reach it). Only NonIndexed Jobs run; suspension, pod failure and success policies are not
simulated.

It also plays the two other controllers a Job's life involves: the garbage collector, which on
a Job's deletion orphans its pods (batch/v1's default), deletes them first (``Foreground``) or
after it (``Background``), and the TTL-after-finished controller, which deletes a finished Job
``ttlSecondsAfterFinished`` later, its pods first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .cache import Obj, key_of
from .clock import now_rfc3339
from .events import Source
from .parts import ControllerParts
from .podstatus import is_pod_ready
from .reactor import Timer
from .replicasets import deletion_order
from .settings import ClusterSettings
from .workloads import (
    PodMaker,
    controlled_by,
    controller_ref,
    delete_pod_gracefully,
    delete_pods_of,
    is_active,
    is_terminating,
    is_terminating_replica,
    parse_time,
    phase,
    write_status,
)
from .workqueue import SyncQueue

JOB_CONTROLLER = Source("job-controller")
BATCH_V1 = "batch/v1"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"
MAX_PODS_PER_SYNC = 500
"""The most pods one sync creates or deletes (the real controller's
``MaxPodCreateDeletePerSync``)."""
MAX_BACKOFF_SECONDS = 600.0
"""The longest wait before a failed pod is replaced (the real controller's ten minutes)."""
MAX_RETRY_SECONDS = 60.0
"""The longest wait before a pod the API refused is tried again."""

COMPLETIONS_REACHED = ("CompletionsReached", "Reached expected number of succeeded pods")
BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE_EXCEEDED = ("DeadlineExceeded", "Job was active longer than specified deadline")

Key = tuple[str, str]


@dataclass
class Failures:
    """A Job's pod failures since its last success, which set the back-off of its next pod."""

    count: int = 0
    last: float = 0.0
    """When the last one was counted (reactor clock)."""


@dataclass
class Counted:
    """The pods one sync counts for the first time, and the Job's totals with them."""

    succeeded: list[Obj]
    failed: list[Obj]
    total_succeeded: int
    total_failed: int


def job_condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    now = now_rfc3339()
    return {
        "type": kind,
        "status": "True",
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def true_condition(job: Obj, kind: str) -> dict[str, Any] | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return dict(condition)
    return None


def finished_condition(job: Obj) -> dict[str, Any] | None:
    """The ``Complete`` or ``Failed`` condition of a Job that has finished."""
    return true_condition(job, "Complete") or true_condition(job, "Failed")


def _finalizers(obj: Obj) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def _number(value: Any) -> int:
    return 0 if value is None else int(value)


def _about(job: Obj) -> Obj:
    """The Job as Events name it."""
    return {**job, "kind": "Job", "apiVersion": BATCH_V1}


class JobController:
    """Reconciles Jobs whenever they or their pods change (batched per reactor turn)."""

    def __init__(self, parts: ControllerParts, settings: ClusterSettings) -> None:
        self._cache = parts.cache
        self._writer = parts.writer
        self._events = parts.events
        self._reactor = parts.reactor
        self._namespace_alive = parts.namespace_alive
        self._settings = settings
        self._pods = PodMaker(parts.writer, parts.events, parts.admit, JOB_CONTROLLER)
        self._queue = SyncQueue(parts.reactor, self._sync_named)
        self._wakeups: dict[Key, Timer] = {}
        self._failures: dict[Key, Failures] = {}
        self._refusals: dict[Key, int] = {}
        self._vanished: dict[Key, list[Obj]] = {}
        """Pods deleted before they were counted, counted at the Job's next sync."""

    # ---- events ---------------------------------------------------------------------------

    def on_job(self, event_type: str, job: Obj) -> None:
        key = key_of(job)
        if event_type == "DELETED":
            self._forget(key)
            delete_pods_of(self._cache, self._writer, key[0], str(job["metadata"].get("uid")))
            return
        self._queue.mark(*key)

    def on_pod(self, event_type: str, pod: Obj) -> None:
        reference = controller_ref(pod)
        if reference is None or reference.get("kind") != "Job":
            return
        namespace = str(pod["metadata"].get("namespace"))
        job = self._cache.get("jobs", namespace, str(reference.get("name")))
        if job is None or job["metadata"].get("uid") != reference.get("uid"):
            return
        key = key_of(job)
        if event_type == "DELETED" and TRACKING_FINALIZER in _finalizers(pod):
            self._vanished.setdefault(key, []).append(pod)
        self._queue.mark(*key)

    def stop(self) -> None:
        for timer in self._wakeups.values():
            timer.cancel()
        self._wakeups.clear()
        self._failures.clear()
        self._refusals.clear()
        self._vanished.clear()

    # ---- bookkeeping ----------------------------------------------------------------------

    def _sync_named(self, namespace: str, name: str) -> None:
        job = self._cache.get("jobs", namespace, name)
        if job is not None:
            self._sync(job)

    def _forget(self, key: Key) -> None:
        self._wake_in(key, None)
        self._failures.pop(key, None)
        self._refusals.pop(key, None)
        self._vanished.pop(key, None)

    def _wake_in(self, key: Key, delay: float | None) -> None:
        """Sync the Job again after ``delay`` seconds (a deadline, a back-off, a TTL), or
        never when None; each sync says when it next needs one."""
        timer = self._wakeups.pop(key, None)
        if timer is not None:
            timer.cancel()
        if delay is not None:
            wake = max(0.0, delay) + 0.01
            self._wakeups[key] = self._reactor.call_later(wake, lambda: self._queue.mark(*key))

    def _backoff(self, count: int, cap: float) -> float:
        return min(self._settings.job_backoff_seconds * 2 ** max(count - 1, 0), cap)

    def _pods_of(self, job: Obj) -> list[Obj]:
        meta = job["metadata"]
        pods = self._cache.all("pods", str(meta.get("namespace")))
        return [p for p in pods if controlled_by(p, str(meta.get("uid")))]

    # ---- one sync -------------------------------------------------------------------------

    def _sync(self, job: Obj) -> None:
        key = key_of(job)
        if is_terminating(job):
            self._collect(job)
        elif finished_condition(job) is not None:
            self._forget(key)
            self._expire(job, key)
        elif (job.get("spec") or {}).get("completionMode", "NonIndexed") == "NonIndexed":
            self._run(job, key)

    def _run(self, job: Obj, key: Key) -> None:
        """Count finished pods, decide whether the Job has succeeded or failed, make or delete
        pods, and write the status."""
        spec, status = job.get("spec") or {}, job.get("status") or {}
        pods = self._pods_of(job)
        counted = self._count(spec, status, pods, self._vanished.pop(key, []))
        self._note_failures(key, counted)
        start = status.get("startTime") or now_rfc3339()
        active = [p for p in pods if is_active(p)]
        ready = sum(1 for p in active if is_pod_ready(p))
        terminating = sum(1 for p in pods if is_terminating_replica(p))
        interim = true_condition(job, "SuccessCriteriaMet") or true_condition(job, "FailureTarget")
        known = interim is not None
        wake: float | None = None
        if interim is None:
            interim, wake = self._failure(spec, pods, counted, start)
        if interim is not None:
            if interim["type"] == "FailureTarget":  # the pods still running fail with the Job
                fresh = [p for p in active if TRACKING_FINALIZER in _finalizers(p)]
                counted.failed.extend(fresh)
                counted.total_failed += len(fresh)
            deleted = sum(1 for p in active if self._delete_pod(job, p))
            running, ready, terminating = 0, 0, terminating + deleted
        else:
            running, removed, retry = self._manage(job, key, active, counted, terminating)
            terminating += removed
            wake = min((w for w in (wake, retry) if w is not None), default=None)
            completions = spec.get("completions")
            done = (
                counted.total_succeeded >= completions
                if completions is not None
                else (counted.total_succeeded > 0)
            )
            if running == 0 and done:
                interim = job_condition("SuccessCriteriaMet", *COMPLETIONS_REACHED)
        conditions = list(status.get("conditions") or [])
        if interim is not None and not known:
            conditions.append(interim)
        final = None
        if interim is not None and running == 0 and terminating == 0:
            kind = "Complete" if interim["type"] == "SuccessCriteriaMet" else "Failed"
            final = job_condition(kind, interim["reason"], interim["message"])
            conditions.append(final)
        counts = {"active": running, "ready": ready, "terminating": terminating}
        new_status = _job_status(start, counts, counted, conditions, final)
        write_status(self._writer, "jobs", job, new_status)
        uid = str(job["metadata"].get("uid"))
        for pod in counted.succeeded + counted.failed:
            self._release(pod, uid, keep_owner=True)
        if final is None:
            self._wake_in(key, wake)
        elif final["type"] == "Complete":
            self._events.normal(_about(job), JOB_CONTROLLER, "Completed", "Job completed")
        else:
            self._events.warning(_about(job), JOB_CONTROLLER, final["reason"], final["message"])

    def _count(
        self, spec: dict[str, Any], status: dict[str, Any], pods: list[Obj], vanished: list[Obj]
    ) -> Counted:
        """The pods still carrying the tracking finalizer that have finished: Succeeded, or
        failed (Failed, or deleted before it finished unless only Failed pods are replaced)."""
        only_failed = spec.get("podReplacementPolicy") == "Failed"
        uncounted = [p for p in pods + vanished if TRACKING_FINALIZER in _finalizers(p)]
        succeeded = [p for p in uncounted if phase(p) == "Succeeded"]
        failed = [
            p
            for p in uncounted
            if phase(p) == "Failed"
            or (not only_failed and (is_terminating(p) or p in vanished) and p not in succeeded)
        ]
        return Counted(
            succeeded,
            failed,
            _number(status.get("succeeded")) + len(succeeded),
            _number(status.get("failed")) + len(failed),
        )

    def _failure(
        self, spec: dict[str, Any], pods: list[Obj], counted: Counted, start: str
    ) -> tuple[dict[str, Any] | None, float | None]:
        """The ``FailureTarget`` condition when the Job has failed; else None and, with an
        ``activeDeadlineSeconds``, how long until it is passed."""
        if counted.total_failed > _number(spec.get("backoffLimit")) or _restarts_exceed(spec, pods):
            return job_condition("FailureTarget", *BACKOFF_LIMIT_EXCEEDED), None
        deadline = spec.get("activeDeadlineSeconds")
        if deadline is None:
            return None, None
        left = (parse_time(start) or time.time()) + int(deadline) - time.time()
        if left <= 0:
            return job_condition("FailureTarget", *DEADLINE_EXCEEDED), None
        return None, left

    def _manage(
        self, job: Obj, key: Key, active: list[Obj], counted: Counted, terminating: int
    ) -> tuple[int, int, float | None]:
        """Make or delete pods so that as many run as parallelism and the completions still
        missing allow; returns the pods running, the pods deleted and, when a pod could not
        be made yet, how long until the next try."""
        spec = job.get("spec") or {}
        parallelism = _number(spec.get("parallelism"))
        completions = spec.get("completions")
        if completions is None:
            wanted = len(active) if counted.total_succeeded else parallelism
        else:
            wanted = max(0, min(int(completions) - counted.total_succeeded, parallelism))
        if len(active) > wanted:
            excess = sorted(active, key=deletion_order)[
                : min(len(active) - wanted, MAX_PODS_PER_SYNC)
            ]
            removed = sum(1 for p in excess if self._delete_pod(job, p))
            return len(active) - removed, removed, None
        waiting = terminating if spec.get("podReplacementPolicy") == "Failed" else 0
        missing = min(wanted - waiting - len(active), MAX_PODS_PER_SYNC)
        if missing <= 0 or not self._namespace_alive(key[0]):
            return len(active), 0, None
        failures = self._failures.get(key)
        if failures is not None and failures.count:
            since = self._reactor.now() - failures.last
            left = self._backoff(failures.count, MAX_BACKOFF_SECONDS) - since
            if left > 0:
                return len(active), 0, left
        made = 0
        for _ in range(missing):
            if self._pods.create(job, "Job", BATCH_V1, (TRACKING_FINALIZER,)) is not None:
                refusals = self._refusals[key] = self._refusals.get(key, 0) + 1
                return len(active) + made, 0, self._backoff(refusals, MAX_RETRY_SECONDS)
            made += 1
        self._refusals.pop(key, None)
        return len(active) + made, 0, None

    def _note_failures(self, key: Key, counted: Counted) -> None:
        """A success resets the back-off; each failure doubles it."""
        if counted.succeeded:
            self._failures.pop(key, None)
        if counted.failed:
            failures = self._failures.setdefault(key, Failures())
            failures.count += len(counted.failed)
            failures.last = self._reactor.now()

    def _delete_pod(self, job: Obj, pod: Obj) -> bool:
        """Delete one of the Job's pods, its tracking finalizer taken off first: whatever it
        counts for is counted by the caller, not when it is gone."""
        self._release(pod, str(job["metadata"].get("uid")), keep_owner=True)
        if not delete_pod_gracefully(self._writer, pod):
            return False
        message = f"Deleted pod: {pod['metadata']['name']}"
        self._events.normal(_about(job), JOB_CONTROLLER, "SuccessfulDelete", message)
        return True

    def _release(self, pod: Obj, job_uid: str, *, keep_owner: bool) -> None:
        """Take the tracking finalizer off a pod (it has been counted) and, unless
        ``keep_owner``, the Job's owner reference (it is orphaned)."""

        def change(current: Obj) -> bool:
            meta = current["metadata"]
            before = (meta.get("finalizers") or [], meta.get("ownerReferences") or [])
            finalizers = [f for f in before[0] if f != TRACKING_FINALIZER]
            references = [r for r in before[1] if keep_owner or r.get("uid") != job_uid]
            if (finalizers, references) == before:
                return False
            for field, kept in (("finalizers", finalizers), ("ownerReferences", references)):
                if kept:
                    meta[field] = kept
                else:
                    meta.pop(field, None)
            return True

        meta = pod["metadata"]
        self._writer.mutate(
            "pods", meta.get("namespace"), meta["name"], change, uid=meta.get("uid")
        )

    # ---- deletion -------------------------------------------------------------------------

    def _collect(self, job: Obj) -> None:
        """The garbage collector's part in a Job's deletion: orphan its pods, or delete them
        and wait until they are gone; then remove the Job."""
        meta = job["metadata"]
        finalizers = _finalizers(job)
        uid = str(meta.get("uid"))
        if ORPHAN_FINALIZER in finalizers:
            for pod in self._pods_of(job):
                self._release(pod, uid, keep_owner=False)
        elif FOREGROUND_FINALIZER in finalizers:
            delete_pods_of(self._cache, self._writer, str(meta.get("namespace")), uid)
            if self._pods_of(job):
                return  # each pod's removal syncs the Job again
        else:
            return
        self._writer.delete("jobs", meta.get("namespace"), meta["name"], uid=uid)

    def _expire(self, job: Obj, key: Key) -> None:
        """The TTL-after-finished controller: a finished Job is deleted, its pods first,
        ``ttlSecondsAfterFinished`` after it finished."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        condition = finished_condition(job)
        if ttl is None or condition is None:
            return
        finished = parse_time(condition.get("lastTransitionTime")) or time.time()
        left = finished + int(ttl) - time.time()
        if left > 0:
            self._wake_in(key, left)
            return

        def expire(current: Obj) -> bool:
            meta = current["metadata"]
            if meta.get("deletionTimestamp"):
                return False
            meta["deletionTimestamp"] = now_rfc3339()
            meta["deletionGracePeriodSeconds"] = 0
            meta["finalizers"] = [*(meta.get("finalizers") or []), FOREGROUND_FINALIZER]
            return True

        meta = job["metadata"]
        self._writer.mutate("jobs", key[0], meta["name"], expire, uid=meta.get("uid"))


def _job_status(
    start: str,
    counts: dict[str, int],
    counted: Counted,
    conditions: list[dict[str, Any]],
    final: dict[str, Any] | None,
) -> dict[str, Any]:
    """A Job's status as the API serializes it: ``active``, ``succeeded`` and ``failed``
    left out when zero, ``ready`` and ``terminating`` always there."""
    status: dict[str, Any] = {"startTime": start}
    for field, value in (
        ("active", counts["active"]),
        ("succeeded", counted.total_succeeded),
        ("failed", counted.total_failed),
    ):
        if value:
            status[field] = value
    status["ready"] = counts["ready"]
    status["terminating"] = counts["terminating"]
    status["uncountedTerminatedPods"] = {}
    if conditions:
        status["conditions"] = conditions
    if final is not None and final["type"] == "Complete":
        status["completionTime"] = final["lastTransitionTime"]
    return status


def _restarts_exceed(spec: dict[str, Any], pods: list[Obj]) -> bool:
    """With ``restartPolicy: OnFailure`` the pods never fail; their containers' restarts
    count against ``backoffLimit`` instead (those of pods still pending or running)."""
    template_spec = (spec.get("template") or {}).get("spec") or {}
    if template_spec.get("restartPolicy") != "OnFailure":
        return False
    restarts = 0
    for pod in pods:
        if phase(pod) not in ("Pending", "Running"):
            continue
        status = pod.get("status") or {}
        for container in (status.get("initContainerStatuses") or []) + (
            status.get("containerStatuses") or []
        ):
            restarts += _number(container.get("restartCount"))
    limit = _number(spec.get("backoffLimit"))
    return restarts > 0 if limit == 0 else restarts >= limit

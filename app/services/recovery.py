"""Bring Redis back in line with Kubernetes: judge one lab, or reconcile all of them.

Kubernetes is the truth about what exists; Redis is what every worker answers from. Drift
appears when something happens outside an operation (a pod deleted by hand, evicted, or a
node lost) or when Redis loses its data. The watcher applies single changes as they are
seen; the reconcile compares everything now and then, rebuilding lost records from the spec
annotation on each pod and removing namespaces nothing refers to any more.

One rule makes both safe against operations running on other workers: read Redis first,
then Kubernetes, then write with ``LabStore.put_if_idle`` expecting what was read. Any
operation that starts or finishes after the Redis read changes the record or holds the
operation key, so the write is refused and the operation's own outcome stands.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from app.builders.names import (
    COMPONENT_LABEL,
    LAB_COMPONENT,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    SPEC_ANNOTATION,
    USER_LABEL,
    lab_namespace,
)
from app.builders.record import spec_from_annotation
from app.config.models import Config
from app.models.lab import LabRecord, LabStatus, PodState
from app.services.context import LabContext
from app.services.pod_state import judge
from app.services.records import lab_record

logger = logging.getLogger(__name__)

LAB_POD_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY},{COMPONENT_LABEL}={LAB_COMPONENT}"
"""Every lab pod the service created, in any namespace, and nothing else."""

DELETED_ERROR = "the lab pod was deleted outside the spawner"
_TERMINAL_PHASES = ("Failed", "Succeeded")


# Judging one lab ---------------------------------------------------------------------


def lab_user(obj: dict[str, Any], namespace_prefix: str) -> str | None:
    """The user a lab pod or namespace belongs to, if it sits where that user's lab would.

    Objects carrying our labels in some other namespace are not labs we can account for.
    """
    meta = obj.get("metadata") or {}
    username = (meta.get("labels") or {}).get(USER_LABEL)
    if not username:
        return None
    expected = lab_namespace(namespace_prefix, str(username))
    where = meta.get("namespace") or meta.get("name")
    return str(username) if where == expected else None


def is_deleting(obj: dict[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def stopped_error(pod: dict[str, Any]) -> str:
    """Why a pod in phase Failed or Succeeded stopped, in a user's terms."""
    status = pod.get("status") or {}
    reason, message = status.get("reason"), status.get("message")
    detail = f"{reason}: {message}" if reason and message else reason or message
    if not detail:
        for container in status.get("containerStatuses") or []:
            terminated = (container.get("state") or {}).get("terminated")
            if terminated:
                detail = (
                    f"container {container.get('name')} exited with code "
                    f"{terminated.get('exitCode')}"
                )
                if terminated.get("reason"):
                    detail += f" ({terminated['reason']})"
                break
    return f"the lab pod stopped: {detail or 'phase ' + str(status.get('phase'))}"


def _with(
    record: LabRecord, status: LabStatus, pod: PodState, error: str | None
) -> LabRecord | None:
    if (record.status, record.pod, record.error) == (status, pod, error):
        return None
    return replace(record, status=status, pod=pod, error=error)


def assess(record: LabRecord, pod: dict[str, Any] | None) -> LabRecord | None:
    """The record ``pod`` (None: no pod) calls for, or None if ``record`` is right already.

    Only for labs no operation is working on. A running lab fails only when its pod is gone
    or has stopped for good: a container restart is the kubelet's business. A starting lab
    (one rebuilt from a pending pod) is judged like a spawn judges it, since no operation
    is left to do so. A failed lab stays failed and only learns whether its pod exists.
    """
    if pod is None:
        if record.status == LabStatus.FAILED:
            return _with(record, LabStatus.FAILED, PodState.MISSING, record.error or DELETED_ERROR)
        return _with(record, LabStatus.FAILED, PodState.MISSING, DELETED_ERROR)
    if is_deleting(pod):
        return None  # Judged when it is gone; until then it may still be serving.
    if record.status == LabStatus.FAILED:
        return _with(record, LabStatus.FAILED, PodState.PRESENT, record.error)
    if (pod.get("status") or {}).get("phase") in _TERMINAL_PHASES:
        return _with(record, LabStatus.FAILED, PodState.PRESENT, stopped_error(pod))
    if record.status == LabStatus.STARTING:
        verdict = judge(pod)
        if verdict.failure:
            return _with(record, LabStatus.FAILED, PodState.PRESENT, verdict.failure)
        if verdict.ready:
            return _with(record, LabStatus.RUNNING, PodState.PRESENT, None)
        return None
    return _with(record, record.status, PodState.PRESENT, record.error)


def rebuild_record(pod: dict[str, Any], config: Config) -> LabRecord | None:
    """A lab record from its pod alone, for a lab Redis has forgotten.

    None when the pod cannot tell (no readable spec annotation) or is going away anyway.
    """
    meta = pod.get("metadata") or {}
    where = f"{meta.get('namespace')}/{meta.get('name')}"
    if is_deleting(pod):
        return None
    annotation = (meta.get("annotations") or {}).get(SPEC_ANNOTATION)
    if not annotation:
        logger.warning("lab pod %s has no spec annotation; cannot rebuild its record", where)
        return None
    try:
        spec = spec_from_annotation(annotation)
    except ValueError as exc:
        logger.warning("lab pod %s: %s; cannot rebuild its record", where, exc)
        return None
    if spec.username != lab_user(pod, config.namespace_prefix):
        logger.warning("lab pod %s: its spec names another user; not rebuilt", where)
        return None

    verdict = judge(pod)
    error: str | None = None
    if (pod.get("status") or {}).get("phase") in _TERMINAL_PHASES:
        status, error = LabStatus.FAILED, stopped_error(pod)
    elif verdict.failure:
        status, error = LabStatus.FAILED, verdict.failure
    elif verdict.ready:
        status = LabStatus.RUNNING
    else:
        status = LabStatus.STARTING
    return lab_record(
        spec,
        config,
        status=status,
        pod=PodState.PRESENT,
        reachable=status is LabStatus.RUNNING,
        error=error,
    )


# Reconciling all labs ----------------------------------------------------------------


class Reconciler:
    """Compares all of Redis with all of Kubernetes and repairs the difference.

    One instance lives for one leadership tenure: the namespaces it suspects of being
    leaked are remembered between its runs, and only a namespace suspected by two
    consecutive runs is deleted, so a namespace caught between a spawn's first steps and
    its record is never removed.
    """

    def __init__(self, ctx: LabContext) -> None:
        self._ctx = ctx
        self._suspects: set[str] = set()

    @property
    def suspects(self) -> frozenset[str]:
        """Namespaces seen leaked once, to be deleted if the next run sees them again."""
        return frozenset(self._suspects)

    def run(self) -> None:
        labs, kube = self._ctx.labs, self._ctx.kube
        prefix = self._ctx.config.namespace_prefix
        # Redis first, then Kubernetes (see the module docstring).
        records = labs.records()
        busy = set(labs.pending_operations())
        pods, _ = kube.list_lab_pods(LAB_POD_SELECTOR)
        namespaces = kube.list_lab_namespaces()

        pods_by_user: dict[str, dict[str, Any]] = {}
        for pod in pods:
            username = lab_user(pod, prefix)
            if username is not None:
                pods_by_user[username] = pod

        for username, pod in pods_by_user.items():
            if username in busy:
                continue
            record = records.get(username)
            if record is None:
                self._rebuild(pod)
            else:
                self._repair(record, pod)
        for username, record in records.items():
            if username not in busy and username not in pods_by_user:
                self._repair(record, None)
        self._collect_leaks(namespaces, set(records) | busy | set(pods_by_user))

    def _rebuild(self, pod: dict[str, Any]) -> None:
        record = rebuild_record(pod, self._ctx.config)
        if record is not None and self._ctx.labs.put_if_idle(record, None):
            logger.info("rebuilt the lost record of %s's lab (%s)", record.username, record.status)

    def _repair(self, record: LabRecord, pod: dict[str, Any] | None) -> None:
        update = assess(record, pod)
        if update is not None and self._ctx.labs.put_if_idle(update, record):
            logger.warning(
                "lab of %s is now %s (pod %s): %s",
                update.username,
                update.status,
                update.pod,
                update.error or "in step with Kubernetes",
            )

    def _collect_leaks(self, namespaces: list[dict[str, Any]], accounted: set[str]) -> None:
        prefix = self._ctx.config.namespace_prefix
        seen: dict[str, str] = {}
        for namespace in namespaces:
            username = lab_user(namespace, prefix)
            if username is None or username in accounted or is_deleting(namespace):
                continue
            seen[namespace["metadata"]["name"]] = username
        doomed = set(seen) & self._suspects
        self._suspects = set(seen) - doomed
        for name in sorted(doomed):
            username = seen[name]
            # A spawn may have begun since this run read Redis: look once more.
            if self._ctx.labs.get(username) or self._ctx.labs.operation(username):
                continue
            logger.warning("deleting namespace %s: no lab, record or operation uses it", name)
            self._ctx.kube.delete_namespace(name)

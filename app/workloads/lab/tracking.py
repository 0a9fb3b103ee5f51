"""How labs' records follow their pods between operations (see ``app.engine.tracking``).

A running lab fails when its pod is gone or has stopped for good; a lab Redis forgot is
rebuilt from the spec annotation on its pod, so losing Redis never loses a running lab.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
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
from app.engine.pods import judge, stopped_detail
from app.models.config import Config
from app.models.lab import LabRecord, PodState
from app.models.workload import WorkloadStatus
from app.storage.kubernetes import KubernetesStorage
from app.workloads.kind import ServiceTracking
from app.workloads.lab.builders import needs_service_address
from app.workloads.lab.records import lab_record, reachable_at
from app.workloads.lab.store import parse_record, record_json

logger = logging.getLogger(__name__)

LAB_POD_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY},{COMPONENT_LABEL}={LAB_COMPONENT}"
"""Every lab pod the service created, in any namespace, and nothing else."""

ReachableAt = Callable[[str], str | None]
"""A lab's ``internal_url`` by username, None while it has none (``records.reachable_at``)."""

DELETED_ERROR = "the lab pod was deleted outside the spawner"
_TERMINAL_PHASES = ("Failed", "Succeeded")


class LabTracking(ServiceTracking):
    """Labs' pods and namespaces, judged against lab records."""

    selector = LAB_POD_SELECTOR
    owns_namespaces = True

    def __init__(self, config: Config, kube: KubernetesStorage) -> None:
        super().__init__(config, kube)
        self._services: dict[str, dict[str, Any]] | None = None
        """Every lab's Service by user, while the reconcile runs and the URL needs them."""

    def prepare(self) -> None:
        """With ``lab.internalUrl`` naming ``{cluster_ip}``, a rebuilt record needs its
        Service's address: every lab's Service is listed once, rather than read per lab
        (a rebuild of 10,000 labs would otherwise make 10,000 calls)."""
        if not needs_service_address(self._config):
            return
        services, _ = self._kube.list_tracked("services", LAB_POD_SELECTOR)
        prefix = self._config.namespace_prefix
        self._services = {
            user: service for service in services if (user := lab_user(service, prefix))
        }

    def release(self) -> None:
        self._services = None

    def owner(self, obj: dict[str, Any]) -> str | None:
        return lab_user(obj, self._config.namespace_prefix)

    def assess(self, record: str, pod: dict[str, Any] | None) -> str | None:
        update = assess(parse_record(record), pod, self._reachable_at)
        return record_json(update) if update is not None else None

    def rebuild(self, pod: dict[str, Any]) -> str | None:
        record = rebuild_record(pod, self._config, self._reachable_at)
        return record_json(record) if record is not None else None

    def _reachable_at(self, username: str) -> str | None:
        listed = self._services
        service = listed.get(username) if listed is not None else None
        return reachable_at(self._kube, self._config, username, service=service)


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
    return f"the lab pod stopped: {stopped_detail(pod)}"


def _with(
    record: LabRecord,
    status: WorkloadStatus,
    pod: PodState,
    error: str | None,
    url: str | None = None,
) -> LabRecord | None:
    """``record`` changed to these values (keeping its URL unless given one), or None when it
    holds them already."""
    url = url or record.internal_url
    if (record.status, record.pod, record.error, record.internal_url) == (status, pod, error, url):
        return None
    return replace(record, status=status, pod=pod, error=error, internal_url=url)


def assess(
    record: LabRecord, pod: dict[str, Any] | None, reachable_at: ReachableAt
) -> LabRecord | None:
    """The record ``pod`` (None: no pod) calls for, or None if ``record`` is right already.

    Only for labs no operation is working on. A running lab fails only when its pod is gone
    or has stopped for good: a container restart is the kubelet's business. A starting lab
    (one rebuilt from a pending pod) is judged like a spawn judges it, since no operation
    is left to do so, and gets its URL when it runs. A running lab without a URL (its
    Service had no address when the record was rebuilt) is given one once it can be. A
    failed lab stays failed and only learns whether its pod exists.
    """
    if pod is None:
        if record.status == WorkloadStatus.FAILED:
            return _with(
                record, WorkloadStatus.FAILED, PodState.MISSING, record.error or DELETED_ERROR
            )
        return _with(record, WorkloadStatus.FAILED, PodState.MISSING, DELETED_ERROR)
    if is_deleting(pod):
        return None  # Judged when it is gone; until then it may still be serving.
    if record.status == WorkloadStatus.FAILED:
        return _with(record, WorkloadStatus.FAILED, PodState.PRESENT, record.error)
    if (pod.get("status") or {}).get("phase") in _TERMINAL_PHASES:
        return _with(record, WorkloadStatus.FAILED, PodState.PRESENT, stopped_error(pod))
    if record.status == WorkloadStatus.STARTING:
        verdict = judge(pod)
        if verdict.failure:
            return _with(record, WorkloadStatus.FAILED, PodState.PRESENT, verdict.failure)
        if verdict.ready:
            url = reachable_at(record.username)
            return _with(record, WorkloadStatus.RUNNING, PodState.PRESENT, None, url)
        return None
    if record.status is WorkloadStatus.RUNNING and record.internal_url is None:
        url = reachable_at(record.username)
        return _with(record, WorkloadStatus.RUNNING, PodState.PRESENT, record.error, url)
    return _with(record, record.status, PodState.PRESENT, record.error)


def rebuild_record(
    pod: dict[str, Any], config: Config, reachable_at: ReachableAt
) -> LabRecord | None:
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
        status, error = WorkloadStatus.FAILED, stopped_error(pod)
    elif verdict.failure:
        status, error = WorkloadStatus.FAILED, verdict.failure
    elif verdict.ready:
        status = WorkloadStatus.RUNNING
    else:
        status = WorkloadStatus.STARTING
    return lab_record(
        spec,
        config,
        status=status,
        pod=PodState.PRESENT,
        url=reachable_at(spec.username) if status is WorkloadStatus.RUNNING else None,
        error=error,
    )

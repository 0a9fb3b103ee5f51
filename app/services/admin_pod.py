"""Starting, reading and deleting the administrators' maintenance pod.

Kubernetes is the one source of truth: nothing about the pod is kept in Redis. Its fixed name
(``admin.pod.name`` in ``admin.pod.namespace``) makes the API server itself enforce "at most
one" across every worker and replica: a second create gets 409 and finds the first pod.

A start never waits for the pod to become ready (its image may take minutes to pull); it
answers with the pod's status at once and the caller polls. The one wait is for a finished
pod (Succeeded or Failed, or already terminating) to be gone before its replacement is
created under the same name, which is bounded and short: a finished pod has nothing to stop.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.builders.admin_pod import build_admin_namespace, build_admin_pod
from app.errors import (
    ConflictError,
    DependencyUnavailableError,
    NotConfiguredError,
    NotFoundError,
)
from app.models.config import Config
from app.storage.kubernetes import KubernetesError, KubernetesStorage, is_transient

logger = logging.getLogger(__name__)

FINISHED_PHASES = ("Succeeded", "Failed")
GONE_TIMEOUT_SECONDS = 30.0
"""How long a start waits for a finished pod to be deleted before creating the new one."""
GONE_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class StartResult:
    """What a start found or did: the pod's status, and whether this call created it."""

    status: dict[str, Any]
    created: bool


class AdminPodService:
    """The maintenance pod's three actions, against Kubernetes alone."""

    def __init__(self, config: Config, kube: KubernetesStorage) -> None:
        self._config = config
        self._pod = config.admin.pod
        self._kube = kube

    def start(self) -> StartResult:
        """Create the pod (and its namespace when missing), or return the one already there.

        A pod that is still pending or running is returned as it is; a finished one is
        deleted and replaced."""
        if not self._pod.image:
            raise NotConfiguredError(
                "no maintenance pod is configured: set admin.pod.image", field="admin.pod.image"
            )
        with _kubernetes():
            existing = self._kube.read_pod(self._pod.namespace, self._pod.name)
            if existing is not None and not _is_over(existing):
                return StartResult(pod_status(existing, detail="already started"), created=False)
            detail = "started"
            if existing is not None:
                self._remove_finished(existing)
                detail = "started; the finished pod before it was replaced"
            self._ensure_namespace()
            try:
                created = self._kube.create_pod(build_admin_pod(self._config))
            except KubernetesError as exc:
                if exc.status != 409:
                    raise
                # Another worker or replica created it between our read and our create.
                raced = self._kube.read_pod(self._pod.namespace, self._pod.name)
                if raced is None:
                    raise ConflictError(
                        "the maintenance pod is being replaced by another request; try again"
                    ) from None
                return StartResult(pod_status(raced, detail="already started"), created=False)
        logger.info("started the maintenance pod %s/%s", self._pod.namespace, self._pod.name)
        return StartResult(pod_status(created, detail=detail), created=True)

    def status(self) -> dict[str, Any]:
        """The pod's status; ``NotFoundError`` when there is none."""
        with _kubernetes():
            pod = self._kube.read_pod(self._pod.namespace, self._pod.name)
        if pod is None:
            raise NotFoundError("no maintenance pod exists")
        return pod_status(pod)

    def delete(self) -> dict[str, Any]:
        """Ask for the pod's deletion (its namespace stays, for the next one); its status as
        it was, marked terminating. ``NotFoundError`` when there is none."""
        with _kubernetes():
            pod = self._kube.read_pod(self._pod.namespace, self._pod.name)
            if pod is None or not self._kube.delete_pod(self._pod.namespace, self._pod.name):
                raise NotFoundError("no maintenance pod exists")
        logger.info("deleting the maintenance pod %s/%s", self._pod.namespace, self._pod.name)
        return {**pod_status(pod, detail="deletion asked"), "terminating": True}

    def _ensure_namespace(self) -> None:
        if self._kube.read_namespace(self._pod.namespace) is not None:
            return
        try:
            self._kube.create_namespace(build_admin_namespace(self._config))
        except KubernetesError as exc:
            if exc.status != 409:  # created meanwhile by another request: as good
                raise

    def _remove_finished(self, pod: dict[str, Any]) -> None:
        """Delete a finished (or terminating) pod and wait, bounded, until it is gone."""
        namespace, name = self._pod.namespace, self._pod.name
        if not (pod.get("metadata") or {}).get("deletionTimestamp"):
            self._kube.delete_pod(namespace, name)
        deadline = time.monotonic() + GONE_TIMEOUT_SECONDS
        while self._kube.read_pod(namespace, name) is not None:
            if time.monotonic() >= deadline:
                raise ConflictError(
                    f"the previous maintenance pod is still being deleted after "
                    f"{GONE_TIMEOUT_SECONDS:g} s; try again"
                )
            time.sleep(GONE_POLL_SECONDS)


def _is_over(pod: dict[str, Any]) -> bool:
    """Finished, or on its way out: a pod that a start replaces rather than returns."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in FINISHED_PHASES or bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def pod_status(pod: dict[str, Any], *, detail: str = "") -> dict[str, Any]:
    """What the routes answer of the pod: where it runs, whether it is ready, its mounts."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    containers = spec.get("containers") or [{}]
    container = containers[0]
    statuses = status.get("containerStatuses") or []
    ready = bool(statuses) and all(s.get("ready") for s in statuses)
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "phase": status.get("phase") or "Pending",
        "ready": ready,
        "terminating": bool(meta.get("deletionTimestamp")),
        "node": spec.get("nodeName"),
        "started": status.get("startTime"),
        "image": container.get("image"),
        "mounts": [
            {
                "volume": m.get("name"),
                "path": m.get("mountPath"),
                "read_only": bool(m.get("readOnly")),
            }
            for m in container.get("volumeMounts") or []
        ],
        "detail": detail,
    }


@contextlib.contextmanager
def _kubernetes() -> Iterator[None]:
    """Kubernetes unreachable or overloaded is a 503 the caller may retry; anything else
    it answers is a fault of ours (RBAC, a rejected object) and stays a 500, logged."""
    try:
        yield
    except KubernetesError as exc:
        if is_transient(exc):
            raise DependencyUnavailableError(
                f"the Kubernetes API is unavailable ({exc.status or 'unreachable'})"
            ) from None
        raise

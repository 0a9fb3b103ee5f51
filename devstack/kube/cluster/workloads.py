"""What the workload controllers (ReplicaSets, Deployments, Jobs) share: owner references,
pods made from a template, which pods count, graceful deletion and the conditions in their
statuses.

A workload's status is only as right as its idea of which pods are its own and which of them
are still alive, so these rules follow the real controllers': a pod with a deletion timestamp
or a finished phase no longer counts, a pod is available once it has been Ready for
``minReadySeconds``, and a pod the controller removes gets its grace period, as a pod
deleted through the API does.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from devstack.kube.errors import ApiError

from .cache import Obj, ObjectCache
from .clock import now_rfc3339
from .daemonsets import random_suffix
from .events import EventRecorder, Source
from .operators import Admit
from .writer import StoreWriter

APPS_V1 = "apps/v1"
DEFAULT_GRACE_SECONDS = 30
FINISHED_PHASES = ("Succeeded", "Failed")


def controller_ref(obj: Obj) -> dict[str, Any] | None:
    """The owner reference marked ``controller: true``, if any."""
    for reference in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if reference.get("controller"):
            return dict(reference)
    return None


def controlled_by(obj: Obj, uid: str) -> bool:
    reference = controller_ref(obj)
    return reference is not None and reference.get("uid") == uid


def owner_reference(owner: Obj, kind: str, api_version: str = APPS_V1) -> dict[str, Any]:
    """The controller reference a workload puts on what it creates, as garbage collection
    and ``kubectl`` read it."""
    meta = owner["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def labels_of(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def is_terminating(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_active(pod: Obj) -> bool:
    """A pod that counts towards a workload's replicas: not being deleted, not finished."""
    return not is_terminating(pod) and phase(pod) not in FINISHED_PHASES


def is_terminating_replica(pod: Obj) -> bool:
    """A pod being deleted that has not finished (``status.terminatingReplicas`` counts it)."""
    return is_terminating(pod) and phase(pod) not in FINISHED_PHASES


def parse_time(value: Any) -> float | None:
    """Seconds since the epoch of an API timestamp, or None when absent or malformed."""
    if not value:
        return None
    try:
        parsed = datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC).timestamp()


def ready_since(pod: Obj) -> float | None:
    """When the pod last became Ready, or None when it is not Ready."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            if condition.get("status") != "True":
                return None
            return parse_time(condition.get("lastTransitionTime")) or 0.0
    return None


def available_at(pod: Obj, min_ready_seconds: int) -> float | None:
    """When the pod is (or will be) available: Ready for ``min_ready_seconds``; None when it
    is not Ready."""
    since = ready_since(pod)
    if since is None:
        return None
    return since + min_ready_seconds if min_ready_seconds > 0 else 0.0


def restart_count(pod: Obj) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return max((int(s.get("restartCount") or 0) for s in statuses), default=0)


def delete_pod_gracefully(writer: StoreWriter, pod: Obj) -> bool:
    """Delete a pod as a controller's API call would: with the pod's own grace period, so
    the kubelet stops its containers (SIGTERM to processes) and removes it once they are
    gone. A pod that never reached a node, or has finished, goes at once."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    namespace, name, uid = meta.get("namespace"), str(meta["name"]), meta.get("uid")
    grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    if not spec.get("nodeName") or phase(pod) in FINISHED_PHASES or not grace or grace <= 0:
        return writer.delete("pods", namespace, name, uid=uid)
    deadline = (datetime.now(UTC) + timedelta(seconds=grace)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def mark(current: Obj) -> bool:
        if current["metadata"].get("deletionTimestamp"):
            return False
        current["metadata"]["deletionTimestamp"] = deadline
        current["metadata"]["deletionGracePeriodSeconds"] = grace
        return True

    return writer.mutate("pods", namespace, name, mark, uid=uid) is not None


def write_status(writer: StoreWriter, resource: str, obj: Obj, status: dict[str, Any]) -> None:
    """Replace a workload's status, as a controller's status update does (no write when it
    has not changed)."""

    def write(current: Obj) -> bool:
        if current.get("status") == status:
            return False
        current["status"] = status
        return True

    meta = obj["metadata"]
    writer.mutate(resource, meta.get("namespace"), meta["name"], write, uid=meta.get("uid"))


def delete_pods_of(cache: ObjectCache, writer: StoreWriter, namespace: str, uid: str) -> None:
    """Background cascading deletion: the garbage collector deletes the pods of an owner that
    is gone, each with its grace period."""
    for pod in cache.all("pods", namespace):
        if controlled_by(pod, uid) and not is_terminating(pod):
            delete_pod_gracefully(writer, pod)


@dataclass(frozen=True)
class PodMaker:
    """Creates a workload's pods from its template as its controller does: ``<owner>-<5
    chars>``, its controller reference, the API server's defaults and quota admission, and
    the ``SuccessfulCreate`` or ``FailedCreate`` Event."""

    writer: StoreWriter
    events: EventRecorder
    admit: Admit
    source: Source

    def create(
        self, owner: Obj, kind: str, api_version: str, finalizers: tuple[str, ...] = ()
    ) -> str | None:
        """Create one pod from ``owner``'s template (with ``finalizers`` added); the API's
        message when it is refused."""
        meta = owner["metadata"]
        template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
        template_meta = template.get("metadata") or {}
        about = {**owner, "kind": kind, "apiVersion": api_version}
        pod_meta: dict[str, Any] = {
            "name": f"{meta['name']}-{random_suffix()}",
            "generateName": f"{meta['name']}-",
            "namespace": meta.get("namespace"),
            "labels": dict(template_meta.get("labels") or {}),
            "ownerReferences": [owner_reference(owner, kind, api_version)],
        }
        for field in ("annotations", "finalizers"):
            if template_meta.get(field):
                pod_meta[field] = copy.deepcopy(template_meta[field])
        for finalizer in finalizers:
            pod_meta.setdefault("finalizers", []).append(finalizer)
        pod: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta}
        pod["spec"] = template.get("spec") or {}
        try:
            self.admit("pods", pod)
        except ApiError as exc:
            message = exc.message
            self.events.warning(about, self.source, "FailedCreate", f"Error creating: {message}")
            return message
        for _ in range(5):
            created = self.writer.create("pods", pod)
            if created is not None:
                name = created["metadata"]["name"]
                self.events.normal(about, self.source, "SuccessfulCreate", f"Created pod: {name}")
                return None
            pod_meta["name"] = f"{meta['name']}-{random_suffix()}"
        return f'pods "{pod_meta["generateName"]}" could not be given a unique name'


# ---- conditions ---------------------------------------------------------------------------


def find_condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


def new_condition(
    kind: str, value: str, reason: str, message: str, *, update_time: bool
) -> dict[str, Any]:
    """A condition stamped now; Deployment conditions also carry ``lastUpdateTime``."""
    now = now_rfc3339()
    condition: dict[str, Any] = {"type": kind, "status": value}
    if update_time:
        condition["lastUpdateTime"] = now
    condition["lastTransitionTime"] = now
    condition["reason"] = reason
    condition["message"] = message
    return condition


def set_condition(status: dict[str, Any], condition: dict[str, Any]) -> None:
    """Put ``condition`` in ``status`` as the controllers do: nothing changes when one of its
    type already has its status and reason; its transition time stays when only the reason
    changes; the newest condition goes last."""
    current = find_condition(status, condition["type"])
    if current is not None and (current.get("status"), current.get("reason")) == (
        condition.get("status"),
        condition.get("reason"),
    ):
        return
    condition = dict(condition)
    if current is not None and current.get("status") == condition.get("status"):
        condition["lastTransitionTime"] = current.get("lastTransitionTime")
    remove_condition(status, condition["type"])
    status["conditions"] = [*(status.get("conditions") or []), condition]


def remove_condition(status: dict[str, Any], kind: str) -> None:
    kept = [c for c in status.get("conditions") or [] if c.get("type") != kind]
    if kept:
        status["conditions"] = kept
    else:
        status.pop("conditions", None)

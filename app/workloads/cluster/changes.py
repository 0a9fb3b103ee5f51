"""A running cluster's changes as operations: a scale or a new tier (a JSON patch of its
operator's object) and a head restart (its head pod deleted with a grace period).

The scaler's service records what the cluster is to be and queues one of these with the
cluster's record; the cluster kind's spawn step sees the change in the operation's spec and
applies it rather than creating anything. Each is idempotent from the top, so a worker that
resumes the operation after another died converges: the patch sets values (never appends),
and the restart deletes only the pod the service named, by its uid, and takes one that is
already terminating, or gone, as deleted.

Where the kind's operator keeps copies of a pod template it made objects from (the Dask
operator's worker group and scheduler Deployment), a new worker tier is written to the copies
too, and a restart gives the head's copies the head's tier, so what the operator makes next
has the tier (``ClusterAdapter.worker_template_copies``, ``head_template_copies``).

A restart's answer is the API server's word on the deletion; the step that had it may be
another worker's, so it travels on the operation's event stream, in the event that says the
head was deleted (``deleted_event`` and ``deletion_in``).
"""

from __future__ import annotations

import json
from typing import Any

from app.engine.kind import Finished, Run, StepFailed
from app.metrics import FailureReason
from app.storage.events import Event, EventType
from app.storage.kubernetes import CustomKind, KubernetesError, KubernetesStorage
from app.workloads.cluster.adapters import ADAPTERS, ClusterAdapter, TemplateCopy, resolve
from app.workloads.cluster.models import ClusterRecord
from app.workloads.cluster.records import custom_kind, parse_cluster

CHANGE = "change"
"""The spec's key naming a change; a spec without it is a creation's."""
SCALE = "scale"
HEAD_TIER = "head_tier"
RESTART_HEAD = "restart_head"

RESTART_GRACE_SECONDS = 20
"""How long a restarted head's containers get to stop, as the design gives it."""

ANSWERED = "Kubernetes answered: "
"""Where the deletion's summary starts in the event that says a head was deleted."""


def patch_spec(change: str, patch: list[dict[str, Any]]) -> dict[str, Any]:
    """The spec of a scale or a tier change: the JSON patch of the operator's object."""
    return {CHANGE: change, "patch": patch}


def restart_spec(pod: dict[str, Any]) -> dict[str, Any]:
    """The spec of a head restart: the head pod to delete, by name and uid (a head its
    operator made again under the same name is not deleted a second time)."""
    meta = pod["metadata"]
    return {CHANGE: RESTART_HEAD, "pod": meta["name"], "uid": meta.get("uid")}


def is_change(spec: dict[str, Any] | None) -> bool:
    return spec is not None and CHANGE in spec


def apply_change(kube: KubernetesStorage, run: Run) -> Finished:
    """Bring the cluster's operator objects to the change queued with its record; the
    record stays as queued (a change leaves a running cluster running)."""
    spec = run.operation.spec or {}
    current = run.workloads.current()
    if current is None:
        raise StepFailed("the cluster's record is gone")
    record = parse_cluster(current)
    adapter = ADAPTERS[record.kind]
    if spec[CHANGE] == RESTART_HEAD:
        said = _restart_head(kube, run, record, str(spec["pod"]), spec.get("uid"))
    else:
        said = _patch(kube, run, adapter, record, spec)
    run.reporter.closing(said)
    return Finished(current)


def _patch(
    kube: KubernetesStorage,
    run: Run,
    adapter: ClusterAdapter,
    record: ClusterRecord,
    spec: dict[str, Any],
) -> str:
    run.reporter.info(f"Patching {adapter.kind} {record.name}", progress=50)
    try:
        kube.patch_custom(custom_kind(adapter), record.namespace, record.name, spec["patch"])
    except KubernetesError as exc:
        if exc.status == 404:
            raise StepFailed(f"{adapter.kind} {record.name} is gone") from None
        raise StepFailed(
            f"Kubernetes refused the change of {adapter.kind} {record.name}: {exc.message}",
            FailureReason.KUBERNETES_ERROR,
        ) from None
    if spec[CHANGE] == HEAD_TIER:
        return f"The head of {record.name} takes tier {record.head_tier} when it is next made"
    _copy_templates(
        kube,
        adapter,
        record,
        adapter.worker_template_copies(record.name),
        adapter.worker_template_path,
    )
    return f"{record.name} scaled to {record.workers} workers of tier {record.worker_tier}"


def _copy_templates(
    kube: KubernetesStorage,
    adapter: ClusterAdapter,
    record: ClusterRecord,
    copies: list[TemplateCopy],
    source_path: str,
) -> None:
    """Give the operator's copies of a pod template the cluster's tier (a copy the operator
    has not made yet will be made from the cluster object, which has it)."""
    if not copies:
        return
    obj = kube.read_custom(custom_kind(adapter), record.namespace, record.name)
    if obj is None:
        raise StepFailed(f"{adapter.kind} {record.name} is gone")
    source = resolve(obj, source_path) or {}
    for copy in copies:
        kind = CustomKind(copy.group, copy.version, copy.plural)
        found = kube.read_custom(kind, record.namespace, copy.name)
        if found is None:
            continue
        try:
            kube.patch_custom(kind, record.namespace, copy.name, copy.patch(found, source))
        except KubernetesError as exc:
            if exc.status == 404:
                continue
            raise StepFailed(
                f"Kubernetes refused the change of {copy.plural} {copy.name}: {exc.message}",
                FailureReason.KUBERNETES_ERROR,
            ) from None


def _restart_head(
    kube: KubernetesStorage, run: Run, record: ClusterRecord, pod: str, uid: str | None
) -> str:
    """Delete the head pod ``pod`` (if it is still the one of ``uid``) with the grace
    period: what the event saying so reads. One already terminating is not deleted again,
    and one that is gone, or was made again, was deleted already. Then the operator's copies
    of the head's template take the cluster's, so the head made next has its tier."""
    run.reporter.info(
        f"Deleting head pod {pod} with a {RESTART_GRACE_SECONDS} s grace period", progress=50
    )
    said = f"Head pod {pod} was deleted already"
    found = kube.read_pod(record.namespace, pod)
    if found is not None and found["metadata"].get("uid") == uid:
        answer: dict[str, Any] | None = found
        if not found["metadata"].get("deletionTimestamp"):
            answer = kube.delete_pod_with_grace(
                record.namespace, pod, grace_seconds=RESTART_GRACE_SECONDS
            )
        if answer is not None:
            said = deleted_event(pod, deletion_summary(answer))
    adapter = ADAPTERS[record.kind]
    _copy_templates(
        kube, adapter, record, adapter.head_template_copies(record.name), adapter.head_template_path
    )
    return said


def deletion_summary(answer: dict[str, Any]) -> dict[str, Any]:
    """What the API server said of the deletion, without the pod's spec and status."""
    meta = answer.get("metadata") or {}
    return {
        "kind": answer.get("kind"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "deletionTimestamp": meta.get("deletionTimestamp"),
        "deletionGracePeriodSeconds": meta.get("deletionGracePeriodSeconds"),
    }


def deleted_event(pod: str, summary: dict[str, Any]) -> str:
    """The event saying the head pod ``pod`` was deleted, with the API server's word."""
    return (
        f"Deleted head pod {pod}; its operator makes it again. "
        f"{ANSWERED}{json.dumps(summary, sort_keys=True)}"
    )


def deletion_in(events: list[Event], pod: str) -> dict[str, Any] | None:
    """The summary of the deletion of ``pod`` among an operation's events; None when its
    operation found it deleted already."""
    start = f"Deleted head pod {pod};"
    for event in events:
        if event.type is EventType.INFO and event.data.startswith(start):
            summary: dict[str, Any] = json.loads(event.data.partition(ANSWERED)[2])
            return summary
    return None

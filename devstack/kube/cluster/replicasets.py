"""The ReplicaSet controller: keeps ``spec.replicas`` live pods, and says in ``status`` how
many there are, how many are Ready and available, and why it could not make more.

Deployments work through ReplicaSets, so what a client reads off a Deployment's status (a
pod starting, serving, terminating, refused by the namespace's quota) is first decided here.
Pods are made from the template as the real controller makes them (``<rs>-<5 chars>``, an
owner reference, the API server's defaults and ResourceQuota admission); a refused pod is a
Warning ``FailedCreate`` Event and the ``ReplicaFailure`` condition, retried with a growing
back-off as the real controller's work queue does. Excess pods are deleted gracefully, the
least useful first (unscheduled, pending, not Ready, most recently Ready, most restarted,
newest), and a deleted ReplicaSet's pods follow it (background cascading deletion).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from devstack.kube.selectors import label_selector_matches

from .cache import Obj
from .clock import now_rfc3339
from .events import Source
from .parts import ControllerParts
from .reactor import Timer
from .workloads import (
    APPS_V1,
    PodMaker,
    available_at,
    controlled_by,
    controller_ref,
    delete_pod_gracefully,
    delete_pods_of,
    find_condition,
    is_active,
    is_terminating,
    is_terminating_replica,
    labels_of,
    owner_reference,
    parse_time,
    phase,
    ready_since,
    remove_condition,
    restart_count,
    write_status,
)
from .workqueue import SyncQueue

REPLICASET_CONTROLLER = Source("replicaset-controller")
BURST_REPLICAS = 500
"""The most pods one sync creates or deletes (the real controller's ``burstReplicas``)."""
RETRY_FIRST_SECONDS = 0.005
RETRY_MAX_SECONDS = 5.0
"""A failed sync is retried after 5 ms, doubling; the real work queue goes on doubling to
1000 s, which would leave a test waiting long after a quota is raised."""
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


@dataclass(frozen=True)
class Failure:
    """Why a sync could not bring the pods to the wanted count."""

    reason: str
    """``FailedCreate`` or ``FailedDelete``, the ``ReplicaFailure`` condition's reason."""
    message: str


def replicas_of(obj: Obj) -> int:
    """``spec.replicas`` of a workload (1 when unset, as the API server defaults it)."""
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def deletion_order(pod: Obj) -> tuple[Any, ...]:
    """Sort key putting the pods to delete first, as the real controller ranks them."""
    ready = ready_since(pod)
    created = parse_time(pod["metadata"].get("creationTimestamp")) or 0.0
    return (
        1 if (pod.get("spec") or {}).get("nodeName") else 0,
        _PHASE_RANK.get(phase(pod), 2),
        0 if ready is None else 1,
        -(ready or 0.0),
        -restart_count(pod),
        -created,
    )


class ReplicaSetController:
    """Reconciles ReplicaSets whenever they or their pods change (batched per reactor turn)."""

    def __init__(self, parts: ControllerParts) -> None:
        self._cache = parts.cache
        self._writer = parts.writer
        self._events = parts.events
        self._reactor = parts.reactor
        self._namespace_alive = parts.namespace_alive
        self._pods = PodMaker(parts.writer, parts.events, parts.admit, REPLICASET_CONTROLLER)
        self._queue = SyncQueue(parts.reactor, self._sync_named)
        self._retries: dict[tuple[str, str], tuple[Timer, float]] = {}
        self._wakeups: dict[tuple[str, str], Timer] = {}

    # ---- events ---------------------------------------------------------------------------

    def on_replicaset(self, event_type: str, replicaset: Obj) -> None:
        meta = replicaset["metadata"]
        namespace, name = str(meta.get("namespace")), str(meta["name"])
        if event_type == "DELETED":
            self._forget((namespace, name))
            delete_pods_of(self._cache, self._writer, namespace, str(meta.get("uid")))
            return
        self._mark(namespace, name)

    def on_pod(self, event_type: str, pod: Obj) -> None:
        namespace = str(pod["metadata"].get("namespace"))
        reference = controller_ref(pod)
        if reference is not None:
            if reference.get("kind") == "ReplicaSet":
                owner = self._cache.get("replicasets", namespace, str(reference.get("name")))
                if owner is not None and owner["metadata"].get("uid") == reference.get("uid"):
                    self._mark(namespace, str(owner["metadata"]["name"]))
            return
        if event_type == "DELETED" or not is_active(pod):
            return
        labels = labels_of(pod)  # an orphan: the ReplicaSets that select it may adopt it
        for replicaset in self._cache.all("replicasets", namespace):
            if label_selector_matches((replicaset.get("spec") or {}).get("selector"), labels):
                self._mark(namespace, str(replicaset["metadata"]["name"]))

    def stop(self) -> None:
        for timer, _ in self._retries.values():
            timer.cancel()
        for timer in self._wakeups.values():
            timer.cancel()
        self._retries.clear()
        self._wakeups.clear()

    # ---- the work queue -------------------------------------------------------------------

    def _mark(self, namespace: str, name: str) -> None:
        self._queue.mark(namespace, name)

    def _sync_named(self, namespace: str, name: str) -> None:
        replicaset = self._cache.get("replicasets", namespace, name)
        if replicaset is not None:
            self._sync(replicaset)

    def _forget(self, key: tuple[str, str]) -> None:
        retry = self._retries.pop(key, None)
        if retry is not None:
            retry[0].cancel()
        wakeup = self._wakeups.pop(key, None)
        if wakeup is not None:
            wakeup.cancel()

    def _retry_later(self, key: tuple[str, str]) -> None:
        """Sync again after a back-off that doubles with each failure in a row."""
        previous = self._retries.pop(key, None)
        delay = RETRY_FIRST_SECONDS
        if previous is not None:
            previous[0].cancel()
            delay = min(previous[1] * 2, RETRY_MAX_SECONDS)
        timer = self._reactor.call_later(delay, lambda: self._mark(*key))
        self._retries[key] = (timer, delay)

    def _wake_at(self, key: tuple[str, str], when: float | None) -> None:
        """Sync again when a Ready pod becomes available (``minReadySeconds`` later)."""
        current = self._wakeups.pop(key, None)
        if current is not None:
            current.cancel()
        if when is not None:
            delay = max(0.0, when - _wall_now()) + 0.01
            self._wakeups[key] = self._reactor.call_later(delay, lambda: self._mark(*key))

    # ---- one sync -------------------------------------------------------------------------

    def _sync(self, replicaset: Obj) -> None:
        meta = replicaset["metadata"]
        key = (str(meta.get("namespace")), str(meta["name"]))
        pods = self._claim_pods(replicaset)
        active = [p for p in pods if is_active(p)]
        failure = None
        if not is_terminating(replicaset):
            failure = self._manage(replicaset, active)
            pods = [
                p for p in self._cache.all("pods", key[0]) if controlled_by(p, str(meta.get("uid")))
            ]
        if failure is not None:
            self._retry_later(key)
        else:
            retry = self._retries.pop(key, None)
            if retry is not None:
                retry[0].cancel()
        status, next_available = replicaset_status(replicaset, pods, failure)
        self._wake_at(key, next_available)
        write_status(self._writer, "replicasets", replicaset, status)

    def _claim_pods(self, replicaset: Obj) -> list[Obj]:
        """Its pods: those it controls that its selector still matches, plus matching orphans,
        which it adopts; pods it controls that no longer match are released."""
        meta = replicaset["metadata"]
        namespace, uid = str(meta.get("namespace")), str(meta.get("uid"))
        selector = (replicaset.get("spec") or {}).get("selector")
        owned = []
        for pod in self._cache.all("pods", namespace):
            reference = controller_ref(pod)
            matches = label_selector_matches(selector, labels_of(pod))
            if reference is not None:
                if reference.get("uid") != uid:
                    continue
                if matches or is_terminating(replicaset):
                    owned.append(pod)
                else:
                    self._set_owner(pod, None)
            elif matches and is_active(pod) and not is_terminating(replicaset):
                adopted = self._set_owner(pod, owner_reference(replicaset, "ReplicaSet"))
                if adopted is not None:
                    owned.append(adopted)
        return owned

    def _set_owner(self, pod: Obj, reference: dict[str, Any] | None) -> Obj | None:
        """Adopt (``reference``) or release (None) a pod."""

        def change(current: Obj) -> bool:
            refs = [
                r
                for r in current["metadata"].get("ownerReferences") or []
                if not r.get("controller")
            ]
            if reference is not None:
                if controller_ref(current) is not None:
                    return False  # someone else adopted it meanwhile
                refs.append(reference)
            current["metadata"]["ownerReferences"] = refs
            return True

        meta = pod["metadata"]
        return self._writer.mutate(
            "pods", meta.get("namespace"), meta["name"], change, uid=meta.get("uid")
        )

    def _manage(self, replicaset: Obj, active: list[Obj]) -> Failure | None:
        """Create or delete pods to reach ``spec.replicas``; the first refusal stops it."""
        namespace = str(replicaset["metadata"].get("namespace"))
        diff = len(active) - replicas_of(replicaset)
        if diff < 0:
            if not self._namespace_alive(namespace):
                return None  # creates would fail until the namespace is gone
            for _ in range(min(-diff, BURST_REPLICAS)):
                message = self._pods.create(replicaset, "ReplicaSet", APPS_V1)
                if message is not None:
                    return Failure("FailedCreate", message)
        elif diff > 0:
            for pod in sorted(active, key=deletion_order)[: min(diff, BURST_REPLICAS)]:
                self._delete_pod(replicaset, pod)
        return None

    def _delete_pod(self, replicaset: Obj, pod: Obj) -> None:
        if delete_pod_gracefully(self._writer, pod):
            about = {**replicaset, "kind": "ReplicaSet", "apiVersion": APPS_V1}
            message = f"Deleted pod: {pod['metadata']['name']}"
            self._events.normal(about, REPLICASET_CONTROLLER, "SuccessfulDelete", message)


def replicaset_status(
    replicaset: Obj, pods: list[Obj], failure: Failure | None
) -> tuple[dict[str, Any], float | None]:
    """The status the controller writes, and when a Ready pod will next become available.

    Counters that are zero are left out, as the API serializes them, except ``replicas`` and
    ``terminatingReplicas``, which are always present.
    """
    spec = replicaset.get("spec") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    active = [p for p in pods if is_active(p)]
    now = _wall_now()
    fully_labeled = ready = available = 0
    next_available: float | None = None
    for pod in active:
        labels = labels_of(pod)
        if all(labels.get(k) == v for k, v in template_labels.items()):
            fully_labeled += 1
        when = available_at(pod, min_ready)
        if when is None:
            continue
        ready += 1
        if when <= now:
            available += 1
        elif next_available is None or when < next_available:
            next_available = when
    previous = replicaset.get("status") or {}
    status: dict[str, Any] = {"replicas": len(active)}
    for field, count in (
        ("fullyLabeledReplicas", fully_labeled),
        ("readyReplicas", ready),
        ("availableReplicas", available),
    ):
        if count:
            status[field] = count
    status["terminatingReplicas"] = sum(1 for p in pods if is_terminating_replica(p))
    status["observedGeneration"] = int(replicaset["metadata"].get("generation") or 1)
    conditions = list(previous.get("conditions") or [])
    if conditions:
        status["conditions"] = conditions
    existing = find_condition(status, "ReplicaFailure")
    if failure is not None and existing is None:
        refused = {
            "type": "ReplicaFailure",
            "status": "True",
            "lastTransitionTime": now_rfc3339(),
            "reason": failure.reason,
            "message": failure.message,
        }
        status["conditions"] = [*conditions, refused]
    elif failure is None and existing is not None:
        remove_condition(status, "ReplicaFailure")
    return status, next_available


def _wall_now() -> float:
    """Wall-clock seconds, the clock the API's timestamps are on."""
    return time.time()

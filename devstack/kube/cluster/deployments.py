"""The Deployment controller: a ReplicaSet per pod template, scaled to roll out changes.

A Deployment names its pods' ReplicaSet after the template's hash (``<deployment>-<hash>``),
so a changed template means a new ReplicaSet and an unchanged one finds its old one again.
A rolling update scales the new ReplicaSet up and the old ones down within ``maxSurge`` and
``maxUnavailable``, counting only available pods as serving: with one replica and the
defaults, the old pod keeps serving until the new one is Ready. ``Recreate`` scales the old
ReplicaSets to zero and waits for their pods to be gone before it makes the new one. A change
of ``spec.replicas`` alone goes to the current ReplicaSet (shared out in proportion when a
rollout is under way). Old ReplicaSets past ``revisionHistoryLimit`` are deleted once a
rollout completes, and a deleted Deployment's ReplicaSets follow it.

The status is what a client reads a Deployment's state from, so it is written as the real
controller writes it: counters summed from the ReplicaSets' statuses, and the ``Available``,
``Progressing`` (with its deadline) and ``ReplicaFailure`` conditions. The arithmetic lives
in ``rollout.py``; this module decides when to act and writes.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from devstack.kube.errors import ApiError
from devstack.kube.selectors import label_selector_matches

from . import rollout
from .cache import Obj
from .events import Source
from .parts import ControllerParts
from .reactor import Timer
from .workloads import (
    APPS_V1,
    FINISHED_PHASES,
    controlled_by,
    controller_ref,
    find_condition,
    is_terminating,
    labels_of,
    new_condition,
    owner_reference,
    phase,
    remove_condition,
    set_condition,
)
from .workqueue import SyncQueue

DEPLOYMENT_CONTROLLER = Source("deployment-controller")
_DEADLINE_MARGIN_SECONDS = 1.0
"""A stuck rollout is checked this long after its deadline: condition times are whole
seconds, so an earlier check could time a rollout out before its deadline had passed."""

Key = tuple[str, str]


class DeploymentController:
    """Reconciles Deployments whenever they, their ReplicaSets or (for ``Recreate``) their
    pods change, batched per reactor turn."""

    def __init__(self, parts: ControllerParts) -> None:
        self._cache = parts.cache
        self._writer = parts.writer
        self._events = parts.events
        self._reactor = parts.reactor
        self._namespace_alive = parts.namespace_alive
        self._admit = parts.admit
        self._queue = SyncQueue(parts.reactor, self._sync_named)
        self._deadlines: dict[Key, Timer] = {}

    # ---- events ---------------------------------------------------------------------------

    def on_deployment(self, event_type: str, deployment: Obj) -> None:
        meta = deployment["metadata"]
        key = (str(meta.get("namespace")), str(meta["name"]))
        if event_type == "DELETED":
            self._cancel_deadline(key)
            self._delete_replicasets_of(key[0], str(meta.get("uid")))
            return
        self._mark(key)

    def on_replicaset(self, event_type: str, replicaset: Obj) -> None:
        namespace = str(replicaset["metadata"].get("namespace"))
        reference = controller_ref(replicaset)
        if reference is not None:
            if reference.get("kind") == "Deployment":
                self._mark_owner(namespace, reference)
            return
        if event_type == "DELETED" or is_terminating(replicaset):
            return
        labels = labels_of(replicaset)  # an orphan: a Deployment that selects it adopts it
        for deployment in self._cache.all("deployments", namespace):
            if label_selector_matches((deployment.get("spec") or {}).get("selector"), labels):
                self._mark((namespace, str(deployment["metadata"]["name"])))

    def on_pod(self, event_type: str, pod: Obj) -> None:
        """A ``Recreate`` rollout waits for the old pods to be gone: a deleted pod may be
        the last one."""
        if event_type != "DELETED":
            return
        namespace = str(pod["metadata"].get("namespace"))
        reference = controller_ref(pod)
        if reference is None or reference.get("kind") != "ReplicaSet":
            return
        replicaset = self._cache.get("replicasets", namespace, str(reference.get("name")))
        owner = controller_ref(replicaset) if replicaset is not None else None
        if owner is not None and owner.get("kind") == "Deployment":
            self._mark_owner(namespace, owner)

    def stop(self) -> None:
        for timer in self._deadlines.values():
            timer.cancel()
        self._deadlines.clear()

    # ---- the work queue -------------------------------------------------------------------

    def _mark_owner(self, namespace: str, reference: dict[str, Any]) -> None:
        deployment = self._cache.get("deployments", namespace, str(reference.get("name")))
        if deployment is not None and deployment["metadata"].get("uid") == reference.get("uid"):
            self._mark((namespace, str(deployment["metadata"]["name"])))

    def _mark(self, key: Key) -> None:
        self._queue.mark(*key)

    def _sync_named(self, namespace: str, name: str) -> None:
        deployment = self._cache.get("deployments", namespace, name)
        if deployment is not None and not is_terminating(deployment):
            self._sync(deployment)

    # ---- one sync -------------------------------------------------------------------------

    def _sync(self, deployment: Obj) -> None:
        replicasets = self._claim(deployment)
        current = self._note_pause(deployment)
        if current is None:
            return
        new_rs, old, current = self._new_and_old(current, replicasets)
        if current is None:
            return
        everything = [*old, new_rs] if new_rs is not None else old
        paused = bool((current.get("spec") or {}).get("paused"))
        if paused or rollout.is_scaling_event(current, everything):
            self._scale(current, new_rs, old)
            if paused:
                self._clean_up(current, old)
            everything = self._fresh(everything)
            new_rs = self._fresh_one(new_rs)
            self._write_status(current, rollout.deployment_status(current, everything, new_rs))
            return
        if rollout.is_rolling(current):
            self._roll(current, new_rs, old)
        else:
            self._recreate(current, new_rs, old)

    def _roll(self, deployment: Obj, new_rs: Obj | None, old: list[Obj]) -> None:
        """One step of a rolling update: scale the new ReplicaSet up if the surge allows,
        else the old ones down if availability allows, else tidy up; then the status."""
        current = deployment
        if new_rs is None:
            new_rs, written = self._create_new(deployment, old)
            if written is None:
                return
            current = written
        everything = [*old, new_rs] if new_rs is not None else list(old)
        if new_rs is not None:
            size, wanted = rollout.desired(new_rs), rollout.desired(current)
            target = (
                wanted if size > wanted else rollout.new_rs_replicas(current, everything, new_rs)
            )
            if size != wanted and self._scale_rs(current, new_rs, target):
                self._rollout_status(current, everything, new_rs)
                return
            if self._scale_down_old(current, everything, old, new_rs):
                self._rollout_status(current, everything, new_rs)
                return
        if rollout.is_complete(current, current.get("status") or {}):
            self._clean_up(current, old)
        self._rollout_status(current, everything, new_rs)

    def _recreate(self, deployment: Obj, new_rs: Obj | None, old: list[Obj]) -> None:
        """Old ReplicaSets to zero; once none of their pods is left, the new one up."""
        everything = [*old, new_rs] if new_rs is not None else list(old)
        scaled = False
        for replicaset in rollout.active(old):
            scaled = self._scale_rs(deployment, replicaset, 0) or scaled
        if scaled or self._old_pods_running(new_rs, old):
            self._rollout_status(deployment, everything, new_rs)
            return
        current = deployment
        if new_rs is None:
            new_rs, written = self._create_new(deployment, old)
            if written is None:
                return
            current = written
            everything = [*old, new_rs] if new_rs is not None else list(old)
        if new_rs is not None:
            self._scale_rs(current, new_rs, rollout.desired(current))
        if rollout.is_complete(current, current.get("status") or {}):
            self._clean_up(current, old)
        self._rollout_status(current, everything, new_rs)

    # ---- ReplicaSets ----------------------------------------------------------------------

    def _claim(self, deployment: Obj) -> list[Obj]:
        """Its ReplicaSets: those it controls that its selector matches, plus matching
        orphans, which it adopts; ones it controls that no longer match are released."""
        meta = deployment["metadata"]
        namespace, uid = str(meta.get("namespace")), str(meta.get("uid"))
        selector = (deployment.get("spec") or {}).get("selector")
        owned = []
        for replicaset in self._cache.all("replicasets", namespace):
            reference = controller_ref(replicaset)
            matches = label_selector_matches(selector, labels_of(replicaset))
            if reference is not None:
                if reference.get("uid") != uid:
                    continue
                if matches:
                    owned.append(replicaset)
                else:
                    self._set_owner(replicaset, None)
            elif matches and not is_terminating(replicaset):
                adopted = self._set_owner(replicaset, owner_reference(deployment, "Deployment"))
                if adopted is not None:
                    owned.append(adopted)
        return owned

    def _set_owner(self, replicaset: Obj, reference: dict[str, Any] | None) -> Obj | None:
        def change(current: Obj) -> bool:
            refs = current["metadata"].get("ownerReferences") or []
            kept = [r for r in refs if not r.get("controller")]
            if reference is not None:
                if len(kept) != len(refs):
                    return False  # adopted by another owner meanwhile
                kept.append(reference)
            current["metadata"]["ownerReferences"] = kept
            return True

        meta = replicaset["metadata"]
        return self._writer.mutate(
            "replicasets", meta.get("namespace"), meta["name"], change, uid=meta.get("uid")
        )

    def _new_and_old(
        self, deployment: Obj, replicasets: list[Obj]
    ) -> tuple[Obj | None, list[Obj], Obj | None]:
        """The ReplicaSet of the current template, if there is one yet (its revision brought
        up to date), and the others; the Deployment as written meanwhile (None once it is
        gone). Creating the new ReplicaSet is left to the strategy: ``Recreate`` must not
        make it while old pods run."""
        new_rs = rollout.find_new(deployment, replicasets)
        old = [r for r in replicasets if r is not new_rs]
        if new_rs is None:
            return None, old, deployment
        new_revision = max((rollout.revision(r) for r in old), default=0) + 1
        annotations = rollout.annotations_for(deployment, new_rs, new_revision, creating=False)
        min_ready = int((deployment.get("spec") or {}).get("minReadySeconds") or 0)
        rs_spec = new_rs.get("spec") or {}
        if annotations != (new_rs["metadata"].get("annotations") or {}) or min_ready != int(
            rs_spec.get("minReadySeconds") or 0
        ):

            def update(current: Obj) -> bool:
                current["metadata"]["annotations"] = annotations
                current.setdefault("spec", {})["minReadySeconds"] = min_ready
                return True

            meta = new_rs["metadata"]
            new_rs = (
                self._writer.mutate(
                    "replicasets", meta.get("namespace"), meta["name"], update, uid=meta.get("uid")
                )
                or new_rs
            )
        revision = str(rollout.revision(new_rs))
        name = new_rs["metadata"]["name"]
        recorded = (deployment["metadata"].get("annotations") or {}).get(rollout.REVISION)
        tracked = rollout.progress_deadline(deployment) is not None
        progressing = find_condition(deployment.get("status") or {}, "Progressing")
        if recorded == revision and (not tracked or progressing is not None):
            return new_rs, old, deployment

        def record(current: Obj) -> bool:
            changed = _set_revision(current, revision)
            status = current.setdefault("status", {})
            if rollout.progress_deadline(current) is not None and (
                find_condition(status, "Progressing") is None
            ):
                message = f'Found new replica set "{name}"'
                condition = new_condition(
                    "Progressing", "True", rollout.FOUND_NEW_RS, message, update_time=True
                )
                set_condition(status, condition)
                changed = True
            return changed

        return new_rs, old, self._update_deployment(deployment, record)

    def _create_new(self, deployment: Obj, old: list[Obj]) -> tuple[Obj | None, Obj | None]:
        """Create the ReplicaSet of the current template, at the size the strategy allows;
        a name held by another template bumps ``collisionCount`` for the next try."""
        meta, spec = deployment["metadata"], deployment.get("spec") or {}
        namespace, uid = str(meta.get("namespace")), str(meta.get("uid"))
        if not self._namespace_alive(namespace):
            return None, deployment
        template = copy.deepcopy(spec.get("template") or {})
        collisions = (deployment.get("status") or {}).get("collisionCount")
        pod_hash = rollout.template_hash(template, collisions)
        template_meta = template.setdefault("metadata", {})
        template_meta["labels"] = {
            **(template_meta.get("labels") or {}),
            rollout.HASH_LABEL: pod_hash,
        }
        selector = copy.deepcopy(spec.get("selector") or {})
        selector["matchLabels"] = {
            **(selector.get("matchLabels") or {}),
            rollout.HASH_LABEL: pod_hash,
        }
        name = f"{meta['name']}-{pod_hash}"
        new_revision = max((rollout.revision(r) for r in old), default=0) + 1
        replicaset: Obj = {
            "apiVersion": APPS_V1,
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": dict(template_meta["labels"]),
                "ownerReferences": [owner_reference(deployment, "Deployment")],
            },
            "spec": {
                "replicas": 0,
                "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                "selector": selector,
                "template": template,
            },
        }
        size = rollout.new_rs_replicas(deployment, [*old, replicaset], replicaset)
        replicaset["spec"]["replicas"] = size
        replicaset["metadata"]["annotations"] = rollout.annotations_for(
            deployment, replicaset, new_revision, creating=True
        )
        try:
            self._admit("replicasets", replicaset)
        except ApiError as exc:
            self._failed_create(deployment, name, exc.message)
            return None, deployment
        created = self._writer.create("replicasets", replicaset)
        existed = created is None
        if created is None:
            found = self._writer.store.get("replicasets", namespace, name)
            if found is None:
                return None, deployment  # refused for another reason: the next sync retries
            if not controlled_by(found, uid) or not rollout.same_template(deployment, found):

                def bump(current: Obj) -> bool:
                    status = current.setdefault("status", {})
                    status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
                    return True

                return None, self._update_deployment(deployment, bump)
            created = found
        if not existed and size > 0:
            self._event(deployment, f"Scaled up replica set {name} from 0 to {size}")

        def record(current: Obj) -> bool:
            changed = _set_revision(current, str(new_revision))
            if not existed and rollout.progress_deadline(current) is not None:
                message = f'Created new replica set "{name}"'
                condition = new_condition(
                    "Progressing", "True", rollout.NEW_RS_CREATED, message, update_time=True
                )
                set_condition(current.setdefault("status", {}), condition)
                changed = True
            return changed

        return created, self._update_deployment(deployment, record)

    def _failed_create(self, deployment: Obj, name: str, message: str) -> None:
        text = f'Failed to create new replica set "{name}": {message}'
        about = {**deployment, "kind": "Deployment", "apiVersion": APPS_V1}
        self._events.warning(about, DEPLOYMENT_CONTROLLER, rollout.FAILED_RS_CREATE, text)
        if rollout.progress_deadline(deployment) is None:
            return

        def record(current: Obj) -> bool:
            condition = new_condition(
                "Progressing", "False", rollout.FAILED_RS_CREATE, text, update_time=True
            )
            set_condition(current.setdefault("status", {}), condition)
            return True

        self._update_deployment(deployment, record)

    def _scale_rs(self, deployment: Obj, replicaset: Obj, size: int) -> bool:
        """Set a ReplicaSet's size (and the Deployment size it records); True when the size
        changed."""
        before = rollout.desired(replicaset)
        recorded = rollout.replicas_annotations(deployment)
        annotations = dict(replicaset["metadata"].get("annotations") or {})
        if before == size and all(annotations.get(k) == v for k, v in recorded.items()):
            return False

        def change(current: Obj) -> bool:
            current.setdefault("spec", {})["replicas"] = size
            current_annotations = current["metadata"].get("annotations") or {}
            current["metadata"]["annotations"] = {**current_annotations, **recorded}
            return True

        meta = replicaset["metadata"]
        updated = self._writer.mutate(
            "replicasets", meta.get("namespace"), meta["name"], change, uid=meta.get("uid")
        )
        if updated is None or before == size:
            return False
        direction = "up" if size > before else "down"
        self._event(
            deployment, f"Scaled {direction} replica set {meta['name']} from {before} to {size}"
        )
        return True

    def _scale(self, deployment: Obj, new_rs: Obj | None, old: list[Obj]) -> None:
        """Only ``spec.replicas`` changed: resize the one active ReplicaSet, or share the
        change out among several in proportion."""
        target = rollout.active_or_latest(new_rs, old)
        if target is not None:
            self._scale_rs(deployment, target, rollout.desired(deployment))
            return
        if rollout.is_saturated(deployment, new_rs):
            for replicaset in rollout.active(old):
                self._scale_rs(deployment, replicaset, 0)
            return
        if not rollout.is_rolling(deployment):
            return
        everything = [*old, new_rs] if new_rs is not None else old
        sizes = rollout.proportional_sizes(deployment, everything)
        for replicaset in rollout.active(everything):
            size = sizes.get(str(replicaset["metadata"]["name"]))
            if size is not None:
                self._scale_rs(deployment, replicaset, size)

    def _scale_down_old(
        self, deployment: Obj, everything: list[Obj], old: list[Obj], new_rs: Obj
    ) -> bool:
        """Scale old ReplicaSets down as far as ``maxUnavailable`` allows: their pods that
        are not available first, then, oldest ReplicaSet first, pods the new ones replace."""
        running = sorted(rollout.active(old), key=rollout.created_order)
        if not running:
            return False
        min_available = rollout.desired(deployment) - rollout.max_unavailable(deployment)
        new_unavailable = rollout.desired(new_rs) - rollout.status_total(
            [new_rs], "availableReplicas"
        )
        room = rollout.spec_total(everything) - min_available - new_unavailable
        if room <= 0:
            return False
        removed = 0
        sizes = {str(r["metadata"]["name"]): rollout.desired(r) for r in running}
        for replicaset in running:
            if removed >= room:
                break
            name = str(replicaset["metadata"]["name"])
            unhealthy = sizes[name] - rollout.status_total([replicaset], "availableReplicas")
            if sizes[name] == 0 or unhealthy <= 0:
                continue
            count = min(room - removed, unhealthy)
            if self._scale_rs(deployment, replicaset, sizes[name] - count):
                sizes[name] -= count
                removed += count
        available = rollout.status_total([*old, new_rs], "availableReplicas")
        excess = available - min_available
        taken = 0
        for replicaset in running:
            if taken >= excess:
                break
            name = str(replicaset["metadata"]["name"])
            if sizes[name] == 0:
                continue
            count = min(sizes[name], excess - taken)
            fresh = self._fresh_one(replicaset) or replicaset
            if self._scale_rs(deployment, fresh, sizes[name] - count):
                sizes[name] -= count
                taken += count
        return removed + taken > 0

    def _old_pods_running(self, new_rs: Obj | None, old: list[Obj]) -> bool:
        """Whether a pod of an old ReplicaSet still exists and has not finished (a
        terminating pod counts: its containers may still run)."""
        if rollout.status_total(old, "replicas") > 0:
            return True
        uids = {str(r["metadata"].get("uid")) for r in old}
        if new_rs is not None:
            uids.discard(str(new_rs["metadata"].get("uid")))
        if not uids:
            return False
        namespace = str(old[0]["metadata"].get("namespace"))
        for pod in self._cache.all("pods", namespace):
            reference = controller_ref(pod)
            owned = reference is not None and reference.get("uid") in uids
            if owned and phase(pod) not in FINISHED_PHASES:
                return True
        return False

    def _clean_up(self, deployment: Obj, old: list[Obj]) -> None:
        """Delete the oldest revisions past ``revisionHistoryLimit`` that have no pods."""
        limit = rollout.revision_history_limit(deployment)
        if limit is None:
            return
        candidates = [r for r in old if not is_terminating(r)]
        surplus = len(candidates) - limit
        if surplus <= 0:
            return
        candidates.sort(key=lambda r: (rollout.revision(r), rollout.created_order(r)))
        for replicaset in candidates[:surplus]:
            meta, status = replicaset["metadata"], replicaset.get("status") or {}
            observed = int(status.get("observedGeneration") or 0)
            if (
                int(status.get("replicas") or 0) != 0
                or rollout.desired(replicaset) != 0
                or int(meta.get("generation") or 1) > observed
            ):
                continue
            self._writer.delete("replicasets", meta.get("namespace"), meta["name"], meta.get("uid"))

    def _delete_replicasets_of(self, namespace: str, uid: str) -> None:
        """Background cascading deletion: the garbage collector deletes the ReplicaSets of a
        Deployment that is gone (and, through them, their pods)."""
        for replicaset in self._cache.all("replicasets", namespace):
            if controlled_by(replicaset, uid):
                meta = replicaset["metadata"]
                self._writer.delete("replicasets", namespace, meta["name"], meta.get("uid"))

    # ---- status ---------------------------------------------------------------------------

    def _note_pause(self, deployment: Obj) -> Obj | None:
        """Pausing or resuming makes ``Progressing`` Unknown, so the time spent paused does
        not count against the deadline."""
        if rollout.progress_deadline(deployment) is None:
            return deployment
        condition = find_condition(deployment.get("status") or {}, "Progressing")
        reason = condition.get("reason") if condition is not None else None
        if reason == rollout.TIMED_OUT:
            return deployment
        paused = bool((deployment.get("spec") or {}).get("paused"))
        if paused and reason != rollout.PAUSED:
            noted = new_condition(
                "Progressing", "Unknown", rollout.PAUSED, "Deployment is paused", update_time=True
            )
        elif not paused and reason == rollout.PAUSED:
            noted = new_condition(
                "Progressing",
                "Unknown",
                rollout.RESUMED,
                "Deployment is resumed",
                update_time=True,
            )
        else:
            return deployment

        def record(current: Obj) -> bool:
            set_condition(current.setdefault("status", {}), noted)
            return True

        return self._update_deployment(deployment, record)

    def _rollout_status(self, deployment: Obj, everything: list[Obj], new_rs: Obj | None) -> None:
        everything = self._fresh(everything)
        new_rs = self._fresh_one(new_rs)
        status = rollout.deployment_status(deployment, everything, new_rs)
        rollout.apply_progress(deployment, status, new_rs, time.time())
        failure = rollout.replica_failure(new_rs, everything)
        if failure is not None:
            set_condition(status, failure)
        else:
            remove_condition(status, "ReplicaFailure")
        self._write_status(deployment, status)
        self._arm_deadline(deployment, status)

    def _write_status(self, deployment: Obj, status: dict[str, Any]) -> None:
        if deployment.get("status") == status:
            return

        def write(current: Obj) -> bool:
            if current.get("status") == status:
                return False
            current["status"] = status
            return True

        self._update_deployment(deployment, write)

    def _arm_deadline(self, deployment: Obj, status: dict[str, Any]) -> None:
        """Sync again when the rollout would exceed its progress deadline."""
        key = (str(deployment["metadata"].get("namespace")), str(deployment["metadata"]["name"]))
        self._cancel_deadline(key)
        if rollout.is_complete(deployment, status):
            return
        when = rollout.deadline_at(deployment, status)
        if when is None:
            return
        delay = max(0.0, when - time.time()) + _DEADLINE_MARGIN_SECONDS
        self._deadlines[key] = self._reactor.call_later(delay, lambda: self._mark(key))

    def _cancel_deadline(self, key: Key) -> None:
        timer = self._deadlines.pop(key, None)
        if timer is not None:
            timer.cancel()

    # ---- plumbing -------------------------------------------------------------------------

    def _update_deployment(self, deployment: Obj, change: Callable[[Obj], bool]) -> Obj | None:
        meta = deployment["metadata"]
        return self._writer.mutate(
            "deployments", meta.get("namespace"), meta["name"], change, uid=meta.get("uid")
        )

    def _fresh_one(self, replicaset: Obj | None) -> Obj | None:
        """The ReplicaSet as the cluster now knows it (after this sync's own writes)."""
        if replicaset is None:
            return None
        meta = replicaset["metadata"]
        found = self._cache.get("replicasets", meta.get("namespace"), meta["name"])
        if found is None or found["metadata"].get("uid") != meta.get("uid"):
            return replicaset
        return found

    def _fresh(self, replicasets: list[Obj]) -> list[Obj]:
        return [r for r in (self._fresh_one(r) for r in replicasets) if r is not None]

    def _event(self, deployment: Obj, message: str) -> None:
        about = {**deployment, "kind": "Deployment", "apiVersion": APPS_V1}
        self._events.normal(about, DEPLOYMENT_CONTROLLER, "ScalingReplicaSet", message)


def _set_revision(deployment: Obj, revision: str) -> bool:
    """Record the current revision on the Deployment; True when it changed."""
    annotations = deployment["metadata"].get("annotations") or {}
    if annotations.get(rollout.REVISION) == revision:
        return False
    deployment["metadata"]["annotations"] = {**annotations, rollout.REVISION: revision}
    return True

"""The cluster scaler API of the design the platform follows (``/ddl_cluster_scaler/``).

Routes, bodies, answers and error codes are the design's; what differs is who the caller is
(Gafaelfawr decides: ``admin:notebook`` is its administrator, otherwise a cluster's owner label
must be the caller's username) and where hardware tiers come from (the service's
configuration). Clusters are found by kind and name among the service's records, which say
whose they are and in which namespace they run.

A scale caps the requested workers at the cluster's maximum and never raises the maximum; a
scale or a change of tier is checked against the owner's budget like a creation and changes
exactly the fields it means (a JSON patch of the operator's object). A head restart deletes
the head pod with a grace period; its operator makes it again, and the status route says
when the new one is ready. Each change is recorded and run as an operation on the cluster
(``change_queue``, ``changes``), with its events on the cluster's event stream, and answered
once that operation ends.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import Any

from app.engine.engine import Engine
from app.engine.pods import judge
from app.errors import (
    BadRequestError,
    ClusterNotFoundError,
    DependencyUnavailableError,
    HeadPodNotFoundError,
    InvalidHardwareTierError,
    InvalidKindError,
    NotScalableError,
    NotSupportedError,
    UnauthorizedError,
)
from app.models.config import HardwareTier
from app.models.identity import Caller, UserInfo
from app.models.usage import cluster_usage
from app.models.workload import WorkloadStatus
from app.timestamps import iso_utc, parse_iso
from app.workloads.cluster.adapters import ADAPTERS, OWNER_LABEL, ClusterAdapter, resolve
from app.workloads.cluster.change_queue import ChangeQueue, Done, Planned
from app.workloads.cluster.changes import (
    HEAD_TIER,
    RESTART_GRACE_SECONDS,
    SCALE,
    deletion_in,
    patch_spec,
    restart_spec,
)
from app.workloads.cluster.kind import selector_text
from app.workloads.cluster.models import ClusterRecord
from app.workloads.cluster.records import custom_kind, pod_shape
from app.workloads.cluster.service import ClusterService
from app.workloads.context import WorkloadContext


class ScalerService:
    def __init__(self, ctx: WorkloadContext, engine: Engine) -> None:
        self._ctx = ctx
        self._clusters = ClusterService(ctx, engine)
        self._changes = ChangeQueue(ctx, engine, self._clusters)

    def adapter(self, kind: str) -> ClusterAdapter:
        if kind not in self._ctx.config.clusters.kinds:
            raise InvalidKindError(
                f"kind must be one of {', '.join(self._ctx.config.clusters.kinds)}", field="kind"
            )
        return ADAPTERS[kind]

    # ---- reads ----------------------------------------------------------------------------

    def of_kind(self, caller: Caller, kind: str) -> dict[str, Any]:
        """Every cluster of the kind for an administrator, the caller's own otherwise: the
        operators' objects as Kubernetes has them."""
        adapter = self.adapter(kind)
        records = self._clusters.all()
        mine = [
            r
            for r in records
            if r.kind == kind and (_is_admin(caller) or r.owner == caller.username)
        ]
        objects = []
        for record in sorted(mine, key=lambda r: (r.owner, r.name)):
            obj = self._ctx.kube.read_custom(custom_kind(adapter), record.namespace, record.name)
            if obj is not None:
                objects.append(obj)
        return {"kind": kind, "count": len(objects), "clusters": objects}

    def object(self, caller: Caller, kind: str, name: str) -> dict[str, Any]:
        return self._owned(caller, self.adapter(kind), name)[1]

    # ---- scale and tiers --------------------------------------------------------------------

    def scale(
        self, caller: Caller, user: UserInfo, kind: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        adapter = self.adapter(kind)
        state = self._owned(caller, adapter, name)
        replicas = body.get("replicas")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise BadRequestError("replicas must be an integer of 0 or more", field="replicas")
        tier_name = body.get("worker_hw_tier_name")
        if tier_name is not None and not isinstance(tier_name, str):
            raise BadRequestError(
                "worker_hw_tier_name must be a string", field="worker_hw_tier_name"
            )

        def plan(record: ClusterRecord, obj: dict[str, Any]) -> Planned:
            if record.status is not WorkloadStatus.RUNNING:
                raise NotScalableError(f"cluster {name} is {record.status.value}, not running")
            tier = self._tier(tier_name, kind, "worker_hw_tier_name") if tier_name else None
            maximum = adapter.max_workers(obj)
            effective = min(replicas, maximum)
            patch = adapter.scale_patch(effective)
            if tier is not None:
                shape = pod_shape(tier, self._ctx.config.clusters.node_pool_label)
                patch += adapter.tier_patch(obj, adapter.worker_template_path, shape)
            wanted = self._reshaped(
                record, workers=effective, worker_tier=tier.name if tier else None
            )
            answer: dict[str, Any] = {
                "kind": kind,
                "name": name,
                "requested_replicas": replicas,
                "effective_replicas": effective,
                "maxReplicas": maximum,
                "capped": effective < replicas,
            }
            asked = f"Scale of {adapter.kind} {name} to {effective} workers"
            if tier is not None:
                answer["worker_hw_tier_id"] = _tier_json(tier)
                asked += f" of tier {tier.name}"
            spec = patch_spec(SCALE, patch + _tiers_patch(adapter, obj, record, wanted))
            return Planned(wanted, spec, f"{asked} requested by {caller.username}", answer)

        done = self._changes.run(user, state, plan, lambda: self._owned(caller, adapter, name))
        self._applied(adapter, done)
        return done.planned.answer

    def head_tier(
        self, caller: Caller, user: UserInfo, kind: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """Give the head's pod template a hardware tier. The running head keeps its old one
        until it is made again (``restart_head``), as its operator leaves a running pod be."""
        adapter = self.adapter(kind)
        state = self._owned(caller, adapter, name)
        tier_name = body.get("head_hw_tier_name")
        if not isinstance(tier_name, str) or not tier_name:
            raise BadRequestError(
                "head_hw_tier_name must name a hardware tier", field="head_hw_tier_name"
            )
        tier = self._tier(tier_name, kind, "head_hw_tier_name")

        def plan(record: ClusterRecord, obj: dict[str, Any]) -> Planned:
            if not resolve(obj, f"{adapter.head_template_path}/spec/containers"):
                raise NotSupportedError(f"{adapter.kind} {name} has no head pod spec to change")
            if record.status is not WorkloadStatus.RUNNING:
                raise NotSupportedError(
                    f"cluster {name} is {record.status.value}; its head tier changes once it runs"
                )
            shape = pod_shape(tier, self._ctx.config.clusters.node_pool_label)
            patch = adapter.tier_patch(obj, adapter.head_template_path, shape)
            wanted = self._reshaped(record, head_tier=tier.name)
            spec = patch_spec(HEAD_TIER, patch + _tiers_patch(adapter, obj, record, wanted))
            asked = f"Head tier {tier.name} for {adapter.kind} {name}"
            answer = {"kind": kind, "name": name}
            return Planned(wanted, spec, f"{asked} requested by {caller.username}", answer)

        done = self._changes.run(user, state, plan, lambda: self._owned(caller, adapter, name))
        self._applied(adapter, done)
        # The object as the change left it (the design answers the patch's result).
        patched = self._owned(caller, adapter, name)[1]
        return {**done.planned.answer, "head_hw_tier_name": tier.name, "object": patched}

    def _applied(self, adapter: ClusterAdapter, done: Done) -> None:
        """Refuse as the design does when the change's patch failed: 404 when the object
        is gone, 503 else."""
        if done.failure is None:
            return
        record = done.planned.record
        if self._ctx.kube.read_custom(custom_kind(adapter), record.namespace, record.name):
            raise DependencyUnavailableError(done.failure)
        raise ClusterNotFoundError(f"no {adapter.route_name} named {record.name}")

    def _reshaped(
        self,
        record: ClusterRecord,
        *,
        workers: int | None = None,
        worker_tier: str | None = None,
        head_tier: str | None = None,
    ) -> ClusterRecord:
        """``record`` with new workers and tiers (None: unchanged), and what it then holds."""
        clusters = self._ctx.config.clusters
        changed = replace(
            record,
            workers=record.workers if workers is None else workers,
            worker_tier=worker_tier or record.worker_tier,
            head_tier=head_tier or record.head_tier,
        )
        worker, head = clusters.tier(changed.worker_tier), clusters.tier(changed.head_tier)
        if worker is None or head is None:
            return changed
        label = clusters.node_pool_label
        usage = cluster_usage(
            changed.workers,
            pod_shape(worker, label).requested(),
            pod_shape(head, label).requested(),
        )
        return replace(changed, usage=asdict(usage))

    # ---- head restarts ------------------------------------------------------------------

    def restart_head(self, caller: Caller, kind: str, name: str) -> dict[str, Any]:
        """Delete the head pod with a grace period and answer once it is deleted: its
        operator makes it again, from the head's template as it is now."""
        adapter = self.adapter(kind)

        def heads() -> tuple[ClusterRecord, list[dict[str, Any]]]:
            record = self._changes.created(self._owned_record(caller, kind, name))
            return record, [p for p in self._heads(adapter, record) if not _terminating(p)]

        def plan(record: ClusterRecord, live: list[dict[str, Any]]) -> Planned:
            if record.status is WorkloadStatus.TERMINATING:
                raise HeadPodNotFoundError(f"cluster {name} is being deleted, its head with it")
            if not live:
                raise HeadPodNotFoundError(f"cluster {name} has no head pod to restart")
            pod = live[-1]
            asked = (
                f"Restart of the head of {adapter.kind} {name} ({pod['metadata']['name']}) "
                f"requested by {caller.username}"
            )
            # To the second, as Kubernetes' creation times: the new head's is never earlier.
            answer = {"pod": pod["metadata"]["name"], "started_at": iso_utc(time.time())}
            return Planned(record, restart_spec(pod), asked, answer)

        done = self._changes.run(None, heads(), plan, heads)
        record, pod = done.planned.record, str(done.planned.answer["pod"])
        deletion = deletion_in(done.events, pod)
        if deletion is None:
            if done.failure is not None and self._ctx.kube.read_pod(record.namespace, pod):
                raise DependencyUnavailableError(done.failure)
            raise HeadPodNotFoundError(f"the head pod {pod} of cluster {name} is gone")
        return {
            "ok": True,
            "namespace": record.namespace,
            "pod": pod,
            "grace_period_seconds": RESTART_GRACE_SECONDS,
            "started_at": done.planned.answer["started_at"],
            "k8s_response": deletion,
        }

    def restart_head_status(
        self, caller: Caller, kind: str, name: str, started_at: str | None
    ) -> dict[str, Any]:
        """Whether the head was made again since ``started_at`` and is ready.

        While the old head terminates it is the one reported (not restarted), and while
        there is none yet no pod is; a new head created at or after ``started_at`` is the
        restarted one. Without a head or a cluster object, there is nothing to wait for (404).
        """
        adapter = self.adapter(kind)
        since = parse_iso(started_at)
        if since is None:
            raise BadRequestError(
                "started_at must be an ISO 8601 time, as restart_head returned it",
                field="started_at",
            )
        record = self._owned_record(caller, kind, name)
        heads = self._heads(adapter, record)
        if not heads and not self._ctx.kube.read_custom(
            custom_kind(adapter), record.namespace, name
        ):
            raise HeadPodNotFoundError(f"cluster {name} has no head pod")
        live = [p for p in heads if not _terminating(p)]
        # Between the old head's end and the new one's making there is no head at all.
        pod = (live or heads)[-1] if heads else None
        meta = pod["metadata"] if pod is not None else {}
        created = meta.get("creationTimestamp")
        restarted = bool(live) and (parse_iso(created) or 0.0) >= since
        ready = pod is not None and judge(pod, "cluster head").ready
        if restarted and ready:
            status = "restarted_and_ready"
        elif restarted:
            status = "restarted_not_ready"
        else:
            status = "not_restarted"
        return {
            "ok": restarted and ready,
            "restarted": restarted,
            "ready": ready,
            "status": status,
            "namespace": record.namespace,
            "pod": meta.get("name"),
            "creationTimestamp": created,
            "started_at": started_at,
            "evaluated_with": "started_at",
        }

    def _heads(self, adapter: ClusterAdapter, record: ClusterRecord) -> list[dict[str, Any]]:
        """The cluster's head pods, found as its operator labels them, oldest first."""
        pods = self._ctx.kube.list_pods(
            record.namespace, selector_text(adapter.head_selector(record.name))
        )
        return sorted(pods, key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))

    # ---- helpers --------------------------------------------------------------------------

    def _owned(
        self, caller: Caller, adapter: ClusterAdapter, name: str
    ) -> tuple[ClusterRecord, dict[str, Any]]:
        """The cluster's record and its operator's object, once the caller may act on it
        and its creation, if one is under way, has ended."""
        record = self._changes.created(self._owned_record(caller, adapter.route_name, name))
        obj = self._ctx.kube.read_custom(custom_kind(adapter), record.namespace, name)
        if obj is None:
            raise ClusterNotFoundError(f"no {adapter.route_name} named {name}")
        _authorize(caller, obj)
        return record, obj

    def _owned_record(self, caller: Caller, kind: str, name: str) -> ClusterRecord:
        """The cluster's record once the caller may act on it: before anything of the
        request's body is looked at.

        Only an administrator learns that a cluster does not exist (404): anyone who is not
        its owner is refused alike (403 ``unauthorized``), whether the name is another
        user's cluster or nobody's, so that names are not given away."""
        record = self._find(kind, name)
        if record is not None:
            _authorize_owner(caller, record.owner)
            return record
        if _is_admin(caller):
            raise ClusterNotFoundError(f"no {kind} named {name}")
        raise UnauthorizedError(_NOT_OWNER)

    def _find(self, kind: str, name: str) -> ClusterRecord | None:
        for record in self._clusters.all():
            if record.name == name and record.kind == kind:
                return record
        return None

    def _tier(self, name: str, kind: str, field: str) -> HardwareTier:
        tier = self._ctx.config.clusters.tier(name)
        if tier is None:
            raise InvalidHardwareTierError(f"no hardware tier named {name}", field=field)
        if tier.kinds and kind not in tier.kinds:
            raise InvalidHardwareTierError(
                f"hardware tier {name} is restricted to {', '.join(tier.kinds)}", field=field
            )
        return tier


_NOT_OWNER = "only an administrator or the cluster's owner may do this"


def _is_admin(caller: Caller) -> bool:
    return caller.is_admin


def _authorize(caller: Caller, obj: dict[str, Any]) -> None:
    """The object's owner label decides, as in the design."""
    _authorize_owner(caller, (obj.get("metadata", {}).get("labels") or {}).get(OWNER_LABEL))


def _authorize_owner(caller: Caller, owner: str | None) -> None:
    if not _is_admin(caller) and owner != caller.username:
        raise UnauthorizedError(_NOT_OWNER)


def _terminating(pod: dict[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def _tiers_patch(
    adapter: ClusterAdapter, obj: dict[str, Any], record: ClusterRecord, wanted: ClusterRecord
) -> list[dict[str, Any]]:
    """The patch recording the tiers' names on the object, when the change gives new ones."""
    if (wanted.worker_tier, wanted.head_tier) == (record.worker_tier, record.head_tier):
        return []
    return adapter.tiers_patch(obj, worker=wanted.worker_tier, head=wanted.head_tier)


def _tier_json(tier: HardwareTier) -> dict[str, Any]:
    return {
        "name": tier.name,
        "id": tier.id,
        "cores": tier.cores,
        "coresLimit": tier.cores_limit,
        "memory": tier.memory,
        "gpus": tier.gpus,
        "nodePool": tier.node_pool,
        "kinds": list(tier.kinds),
    }

"""The cluster scaler API of the design the platform follows (``/ddl_cluster_scaler/``).

Routes, bodies, answers and error codes are the design's; what differs is who the caller is
(Gafaelfawr decides: ``admin:notebook`` is its administrator, otherwise a cluster's owner label
must be the caller's username) and where hardware tiers come from (the service's
configuration). Clusters are found by kind and name among the service's records, which say
whose they are and in which namespace they run.

A scale caps the requested workers at the cluster's maximum and never raises the maximum, is
checked against the owner's budget like a creation, and changes exactly the fields it means
(a JSON patch of the operator's object), then the record.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, replace
from typing import Any

from app.config.models import HardwareTier
from app.engine.engine import Engine
from app.errors import (
    BadRequestError,
    ClusterNotFoundError,
    InvalidHardwareTierError,
    InvalidKindError,
    NotScalableError,
    QuotaExceededError,
    UnauthorizedError,
)
from app.models.cluster import ClusterRecord, ClusterStatus, cluster_json, parse_cluster
from app.models.identity import Caller, UserInfo
from app.models.usage import Usage, cluster_usage
from app.services.auth import ADMIN_SCOPE
from app.services.budgets import budget_for, budget_refusal
from app.services.clusters import ClusterService, budget_lock
from app.services.context import LabContext
from app.workloads.cluster.adapters import ADAPTERS, OWNER_LABEL, ClusterAdapter
from app.workloads.cluster.kind import CLUSTER_KIND, cluster_ref
from app.workloads.cluster.records import custom_kind, pod_shape

logger = logging.getLogger(__name__)


class ScalerService:
    def __init__(self, ctx: LabContext, engine: Engine) -> None:
        self._ctx = ctx
        self._engine = engine
        self._clusters = ClusterService(ctx, engine)

    def adapter(self, kind: str) -> ClusterAdapter:
        if kind not in self._ctx.config.clusters.kinds:
            raise InvalidKindError(
                f"kind must be one of {', '.join(self._ctx.config.clusters.kinds)}", field="kind"
            )
        return ADAPTERS[kind]

    # ---- reads ----------------------------------------------------------------------------

    def list(self, caller: Caller, kind: str) -> dict[str, Any]:
        """Every cluster of the kind for an administrator, the caller's own otherwise: the
        operators' objects as Kubernetes has them."""
        adapter = self.adapter(kind)
        records = [parse_cluster(raw) for raw in self._engine.store.records(CLUSTER_KIND).values()]
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
        adapter = self.adapter(kind)
        record = self._find(kind, name)
        obj = self._ctx.kube.read_custom(custom_kind(adapter), record.namespace, record.name)
        if obj is None:
            raise ClusterNotFoundError(f"no {kind} named {name}")
        _authorize(caller, obj)
        return obj

    # ---- scale ----------------------------------------------------------------------------

    def scale(
        self, caller: Caller, user: UserInfo, kind: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        adapter = self.adapter(kind)
        replicas = body.get("replicas")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise BadRequestError("replicas must be an integer of 0 or more", field="replicas")
        tier_name = body.get("worker_hw_tier_name")
        if tier_name is not None and not isinstance(tier_name, str):
            raise BadRequestError(
                "worker_hw_tier_name must be a string", field="worker_hw_tier_name"
            )
        record = self._find(kind, name)
        obj = self._ctx.kube.read_custom(custom_kind(adapter), record.namespace, name)
        if obj is None:
            raise ClusterNotFoundError(f"no {kind} named {name}")
        _authorize(caller, obj)
        if record.status is not ClusterStatus.RUNNING:
            raise NotScalableError(f"cluster {name} is {record.status.value}, not running")
        tier = self._tier(tier_name, kind) if tier_name is not None else None
        maximum = adapter.max_workers(obj)
        effective = min(replicas, maximum)
        clusters = self._ctx.config.clusters
        with budget_lock(self._engine, record.owner):
            # Read again under the lock: another scale may have changed the cluster.
            record = self._find(kind, name)
            current = Usage.from_json(record.usage)
            usage = current
            worker_tier = clusters.tier(tier.name if tier else record.worker_tier)
            head_tier = clusters.tier(record.head_tier)
            if worker_tier is not None and head_tier is not None:
                label = clusters.node_pool_label
                usage = cluster_usage(
                    effective,
                    pod_shape(worker_tier, label).requested(),
                    pod_shape(head_tier, label).requested(),
                )
            # Only what grows is checked, so a user over a lowered budget may still shrink.
            # The owner's budget needs the owner's groups: an administrator is not held to it.
            if user.username == record.owner:
                budget = budget_for(user, self._ctx.config.budgets)
                refusal = budget_refusal(budget, self._clusters.held(record.owner), usage - current)
                if refusal is not None:
                    raise QuotaExceededError(refusal)
            patch = adapter.scale_patch(effective)
            if tier is not None:
                shape = pod_shape(tier, clusters.node_pool_label)
                patch += adapter.tier_patch(obj, adapter.worker_template_path, shape)
            self._ctx.kube.patch_custom(custom_kind(adapter), record.namespace, name, patch)
            updated = replace(
                record,
                workers=effective,
                worker_tier=tier.name if tier else record.worker_tier,
                usage=asdict(usage),
            )
            if not self._engine.store.put_if_idle(
                ref=cluster_ref(record.owner, name),
                record=cluster_json(updated),
                expect=cluster_json(record),
            ):
                logger.warning("cluster %s changed while it was scaled; its record is left", name)
        answer: dict[str, Any] = {
            "kind": kind,
            "name": name,
            "requested_replicas": replicas,
            "effective_replicas": effective,
            "maxReplicas": maximum,
            "capped": effective < replicas,
        }
        if tier is not None:
            answer["worker_hw_tier_id"] = _tier_json(tier)
        return answer

    # ---- helpers --------------------------------------------------------------------------

    def _find(self, kind: str, name: str) -> ClusterRecord:
        for ref_name, raw in self._engine.store.records(CLUSTER_KIND).items():
            if ref_name.rpartition("/")[2] == name:
                record = parse_cluster(raw)
                if record.kind == kind:
                    return record
        raise ClusterNotFoundError(f"no {kind} named {name}")

    def _tier(self, name: str, kind: str) -> HardwareTier:
        tier = self._ctx.config.clusters.tier(name)
        if tier is None:
            raise InvalidHardwareTierError(
                f"no hardware tier named {name}", field="worker_hw_tier_name"
            )
        if tier.kinds and kind not in tier.kinds:
            raise InvalidHardwareTierError(
                f"hardware tier {name} is restricted to {', '.join(tier.kinds)}",
                field="worker_hw_tier_name",
            )
        return tier


def _is_admin(caller: Caller) -> bool:
    return ADMIN_SCOPE in caller.data.scopes


def _authorize(caller: Caller, obj: dict[str, Any]) -> None:
    owner = (obj.get("metadata", {}).get("labels") or {}).get(OWNER_LABEL)
    if not _is_admin(caller) and owner != caller.username:
        raise UnauthorizedError("only an administrator or the cluster's owner may do this")


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

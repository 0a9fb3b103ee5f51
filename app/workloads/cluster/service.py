"""The rules behind the cluster routes: what a user may create, and the answers about it.

A request is checked whole before anything happens: the kind is offered, the user has a
running lab (the cluster lives in its namespace and goes with it), the image is one the user
may use (the lab's by default), the tiers exist and serve this kind, the worker counts are in
bounds, and the cluster fits the user's budget with what they hold already. Only then is the
cluster recorded and its creation queued, under the owner's budget lock, so two requests at
once cannot both take the last of a budget.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, replace

from app.builders.names import lab_namespace
from app.engine.engine import Engine
from app.engine.service import RecordCodec
from app.errors import (
    ConflictError,
    InvalidRequestError,
    QuotaExceededError,
)
from app.models.config import HardwareTier
from app.models.identity import UserInfo
from app.models.images import ImageChoice
from app.models.workload import WorkloadStatus
from app.storage.events import EventType
from app.workloads.admission_groups import admission_group
from app.workloads.beside_lab import BesideLabService
from app.workloads.budgets import budget_for, budget_lock, budget_refusal, lab_user
from app.workloads.cluster.adapters import ADAPTERS, ClusterShape, PodShape
from app.workloads.cluster.kind import cluster_ref, shape_to_json
from app.workloads.cluster.models import ClusterRecord
from app.workloads.cluster.records import cluster_json, parse_cluster, pod_shape
from app.workloads.context import WorkloadContext
from app.workloads.holdings import Holdings, holdings_of
from app.workloads.refs import CLUSTER_KIND


@dataclass(frozen=True)
class ClusterRequest:
    kind: str
    workers: int
    max_workers: int | None
    worker_tier: str | None
    head_tier: str | None
    image: str | None


CLUSTER_RECORDS = RecordCodec(
    kind=CLUSTER_KIND,
    noun="cluster",
    parse=parse_cluster,
    dump=cluster_json,
    terminating=lambda record: replace(record, status=WorkloadStatus.TERMINATING, error=None),
)


class ClusterService(BesideLabService[ClusterRecord]):
    def __init__(self, ctx: WorkloadContext, engine: Engine) -> None:
        super().__init__(ctx, engine, CLUSTER_RECORDS)

    # Create --------------------------------------------------------------------------

    def create(self, username: str, caller: UserInfo, request: ClusterRequest) -> ClusterRecord:
        """Create a cluster for ``username``: the caller themself, or an administrator acting
        for them, in which case the user is known from their running lab's record."""
        config = self._ctx.config.clusters
        if request.kind not in config.kinds:
            raise InvalidRequestError(
                f"unknown kind {request.kind!r}; kinds are: {', '.join(config.kinds)}",
                field="kind",
            )
        lab = self._ctx.labs.get(username)
        if lab is None or lab.status is not WorkloadStatus.RUNNING:
            raise ConflictError(f"user {username} has no running lab to run a cluster beside")
        user = caller if caller.username == username else lab_user(lab)
        image = str(lab.options.get("image") or "")
        if request.image is not None:
            choice = ImageChoice(reference=request.image, field="image")
            image = self._ctx.images.resolve(choice, user).reference
        worker = self._tier(
            request.worker_tier or config.default_worker_tier, request.kind, "worker_tier"
        )
        head = self._tier(request.head_tier or config.default_head_tier, request.kind, "head_tier")
        max_workers = request.max_workers if request.max_workers is not None else request.workers
        # Its request schema saw to workers of 0 or more, and room for them under max_workers.
        if max_workers > config.max_workers:
            raise InvalidRequestError(
                f"max_workers must not exceed {config.max_workers}", field="max_workers"
            )
        assert user.uid is not None and user.gid is not None  # a running lab's user has them
        adapter = ADAPTERS[request.kind]
        shape = ClusterShape(
            name=f"{request.kind.removesuffix('clusters')}-{secrets.token_hex(3)}",
            namespace=lab_namespace(self._ctx.config.namespace_prefix, user.username),
            owner=user.username,
            uid=user.uid,
            gid=user.gid,
            image=image,
            workers=request.workers,
            max_workers=max_workers,
            worker=self._pod_shape(worker),
            head=self._pod_shape(head),
        )
        record = ClusterRecord(
            kind=request.kind,
            name=shape.name,
            namespace=shape.namespace,
            owner=user.username,
            status=WorkloadStatus.STARTING,
            workers=shape.workers,
            max_workers=shape.max_workers,
            worker_tier=worker.name,
            head_tier=head.name,
            image=image,
            usage=asdict(shape.usage()),
        )
        with budget_lock(self._engine, user.username):
            held = self.holdings(user.username).usage()
            refusal = budget_refusal(
                budget_for(user, self._ctx.config.budgets), held, shape.usage()
            )
            if refusal is not None:
                raise QuotaExceededError(refusal)
            queued = self._engine.queue_spawn(
                cluster_ref(user.username, shape.name),
                record=cluster_json(record),
                spec={"kind": request.kind, "shape": shape_to_json(shape)},
                secret=None,
                first_events=[(EventType.INFO, f"{adapter.kind} {shape.name} requested")],
                group=admission_group(user, self._ctx.config.admission),
            )
        if queued.rebuilding or not queued.queued:
            raise ConflictError(f"cluster {shape.name} could not be queued; try again")
        return record

    def _tier(self, name: str, kind: str, field: str) -> HardwareTier:
        config = self._ctx.config.clusters
        tier = config.tier(name)
        if tier is None:
            names = ", ".join(t.name for t in config.tiers)
            raise InvalidRequestError(f"unknown tier {name!r}; tiers are: {names}", field=field)
        if tier.kinds and kind not in tier.kinds:
            raise InvalidRequestError(
                f"tier {name} is only for {', '.join(tier.kinds)}", field=field
            )
        return tier

    def _pod_shape(self, tier: HardwareTier) -> PodShape:
        return pod_shape(tier, self._ctx.config.clusters.node_pool_label)

    def owner(self, username: str) -> UserInfo | None:
        """The owner of clusters as their lab's record knows them; None without a lab."""
        lab = self._ctx.labs.get(username)
        return lab_user(lab) if lab is not None else None

    def holdings(self, owner: str) -> Holdings:
        """What the owner holds now, of every budgeted kind; never partial while Redis is
        being rebuilt."""
        self.require_complete()
        return holdings_of(self._ctx, self._engine.workloads.records, owner)

    # Delete --------------------------------------------------------------------------

    def delete(self, owner: str, name: str) -> ClusterRecord:
        """Start deleting the cluster; its record as the deletion began."""
        return self.start_delete(
            cluster_ref(owner, name),
            missing=self.missing(owner, name),
            first_events=[(EventType.INFO, f"Deletion of cluster {name} requested")],
        )

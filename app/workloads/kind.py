"""What this service's kinds share as declarations: they are built from the process's
``WorkloadContext``, and their operations are bounded by the configured operation timeouts
(``lab.spawnTimeout``, ``lab.deleteTimeout``) unless the kind says otherwise."""

from __future__ import annotations

from typing import ClassVar

from app.engine.kind import WorkloadKind
from app.engine.tracking import PodTracking
from app.models.workload import Action
from app.workloads.context import WorkloadContext
from app.workloads.holdings import Budgeted


class ServiceKind(WorkloadKind):
    """A kind of workload of this service (``app.workloads.kinds.KINDS``)."""

    budget: ClassVar[Budgeted | None] = None
    """How its workloads count against their owner's budget and lab namespace quota; None:
    they do not."""

    def __init__(self, ctx: WorkloadContext) -> None:
        self._ctx = ctx
        self.tracking = self.track(ctx)

    def track(self, ctx: WorkloadContext) -> PodTracking | None:
        """How the kind's records follow Kubernetes; None: they need not."""
        return None

    def timeout(self, action: Action) -> float:
        timeouts = self._ctx.config.lab
        return timeouts.spawn_timeout if action is Action.SPAWN else timeouts.delete_timeout

"""What this service's kinds share as declarations: they are built from the process's
``WorkloadContext``, and their operations are bounded by the configured operation timeouts
(``lab.spawnTimeout``, ``lab.deleteTimeout``) unless the kind says otherwise."""

from __future__ import annotations

from typing import ClassVar

from app.engine.kind import WorkloadKind
from app.engine.tracking import WorkloadTracking
from app.models.config import Config
from app.models.workload import Action
from app.storage.kubernetes import CustomKind, KubernetesStorage
from app.workloads.budgeted import Budgeted
from app.workloads.context import WorkloadContext


class ServiceTracking(WorkloadTracking):
    """A kind's tracking that judges and rebuilds its records from the service's
    configuration and what Kubernetes holds (every kind's but the image validations')."""

    def __init__(self, config: Config, kube: KubernetesStorage) -> None:
        self._config = config
        self._kube = kube


class ServiceKind(WorkloadKind):
    """A kind of workload of this service (``app.workloads.kinds.KINDS``)."""

    tracked_by: ClassVar[type[ServiceTracking] | None] = None
    """How its records follow Kubernetes between operations (``track`` builds it); None:
    they need not."""

    budget: ClassVar[Budgeted | None] = None
    """How its workloads count against their owner's budget and lab namespace quota; None:
    they do not."""

    operator_objects: ClassVar[tuple[CustomKind, ...]] = ()
    """The custom resources of its workloads that an operator holds, with a finalizer, in
    their owner's lab namespace: a lab's delete deletes them before the namespace
    (``app.workloads.lab.delete``)."""

    def __init__(self, ctx: WorkloadContext) -> None:
        self._ctx = ctx
        self.tracking = self.track(ctx)

    def track(self, ctx: WorkloadContext) -> WorkloadTracking | None:
        """How the kind's records follow Kubernetes: ``tracked_by``, built for this
        process; a kind whose tracking needs something else says so here."""
        return self.tracked_by(ctx.config, ctx.kube) if self.tracked_by is not None else None

    def timeout(self, action: Action) -> float:
        timeouts = self._ctx.config.lab
        return timeouts.spawn_timeout if action is Action.SPAWN else timeouts.delete_timeout

"""Labs as a kind of workload: their steps, timeouts and failed record for the engine."""

from __future__ import annotations

from dataclasses import replace

from app.builders.names import lab_namespace, object_name
from app.engine.kind import Finished, Run, WorkloadKind
from app.models.lab import LabStatus, PodState
from app.models.workload import Action
from app.storage.events import EventType
from app.storage.kubernetes import KubernetesError
from app.storage.labs import LAB_KIND, record_json
from app.workloads.context import WorkloadContext
from app.workloads.lab.delete import DELETED, run_delete
from app.workloads.lab.spawn import run_spawn
from app.workloads.lab.tracking import LabTracking

RUNNING = "The lab is running"


class LabKind(WorkloadKind):
    """A user's lab: one per user, named after them."""

    name = LAB_KIND
    admitted = True

    def __init__(self, ctx: WorkloadContext) -> None:
        self._ctx = ctx
        self.tracking = LabTracking(ctx.config, ctx.kube)

    def timeout(self, action: Action) -> float:
        lab = self._ctx.config.lab
        return lab.spawn_timeout if action is Action.SPAWN else lab.delete_timeout

    def spawn(self, run: Run) -> Finished:
        spawned = run_spawn(self._ctx, run)
        return Finished(record_json(spawned.record), [*spawned.events, (EventType.INFO, RUNNING)])

    def delete(self, run: Run) -> Finished:
        run_delete(self._ctx, run)
        return Finished(None, [(EventType.INFO, DELETED)])

    def failed_record(self, run: Run, message: str) -> str | None:
        """The lab's record with status failed, and its pod as Kubernetes has it now."""
        username = run.operation.ref.name
        current = self._ctx.labs.get(username)
        if current is None:
            return None
        namespace = lab_namespace(self._ctx.config.namespace_prefix, username)
        try:
            pod = self._ctx.kube.read_pod(namespace, object_name(username, "lab"))
            present = pod is not None
        except KubernetesError:
            present = current.pod == PodState.PRESENT
        failed = replace(
            current,
            status=LabStatus.FAILED,
            pod=PodState.PRESENT if present else PodState.MISSING,
            error=message,
        )
        return record_json(failed)

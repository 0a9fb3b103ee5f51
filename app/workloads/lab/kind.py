"""Labs as a kind of workload: their steps, timeouts and failed record for the engine."""

from __future__ import annotations

from dataclasses import replace

from app.builders.names import lab_namespace, object_name
from app.engine.kind import Finished, Run
from app.models.lab import PodState
from app.models.workload import WorkloadStatus
from app.storage.kubernetes import KubernetesError
from app.workloads.kind import ServiceKind
from app.workloads.lab.delete import DELETED, run_delete
from app.workloads.lab.spawn import run_spawn
from app.workloads.lab.store import LAB_KIND, record_json
from app.workloads.lab.tracking import LabTracking

RUNNING = "The lab is running"


class LabKind(ServiceKind):
    """A user's lab: one per user, named after them."""

    name = LAB_KIND
    admitted = True
    tracked_by = LabTracking

    def spawn(self, run: Run) -> Finished:
        record = run_spawn(self._ctx, run)
        run.reporter.closing(RUNNING)
        return Finished(record_json(record))

    def delete(self, run: Run) -> Finished:
        run_delete(self._ctx, run)
        run.reporter.closing(DELETED)
        return Finished(None)

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
            status=WorkloadStatus.FAILED,
            pod=PodState.PRESENT if present else PodState.MISSING,
            error=message,
        )
        return record_json(failed)

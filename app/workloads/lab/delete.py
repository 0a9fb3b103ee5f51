"""The steps of a lab's delete: its namespace, and with it everything in it.

Deleting the namespace stops the pod as deleting the pod would (Kubernetes gives it its
grace period) and removes every other object of the lab, so the delete is three calls in
turn (read the namespace, delete it, watch it go from the delete's answer) rather than a
pod delete and its wait first.
"""

from __future__ import annotations

from app.builders.names import lab_namespace
from app.concurrency import concurrently
from app.engine.kind import Run
from app.engine.waiting import wait_namespace_gone
from app.storage.kubernetes import is_ours
from app.workloads.context import WorkloadContext

DELETED = "The lab is deleted"
"""The delete's last event, announced with its ``complete`` when the record goes."""


def run_delete(ctx: WorkloadContext, run: Run) -> None:
    reporter = run.reporter
    username = run.operation.ref.name
    namespace = lab_namespace(ctx.config.namespace_prefix, username)
    existing = ctx.kube.read_namespace(namespace)
    if existing is None:
        reporter.info(f"Namespace {namespace} is already gone", progress=10)
    elif not is_ours(existing):
        # A namespace of that name the service never made (a spawn refused to use it, so
        # nothing of the lab is in it).
        reporter.info(f"Namespace {namespace} is not the service's; leaving it alone", progress=10)
    else:
        # Announced beside the call rather than before it: one Redis write fewer in turn.
        answer, _ = concurrently(
            lambda: ctx.kube.delete_namespace(namespace),
            lambda: reporter.info("Stopping the lab and removing its namespace", progress=30),
        )
        with run.waiting():
            wait_namespace_gone(ctx.kube, reporter, namespace, answer)

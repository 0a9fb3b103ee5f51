"""The steps of a lab's delete: the pod first, then the namespace and everything in it."""

from __future__ import annotations

from app.builders.names import lab_namespace, object_name
from app.engine.kind import Run
from app.engine.waiting import wait_namespace_gone, wait_pod_gone
from app.services.context import LabContext
from app.storage.kubernetes import is_ours


def run_delete(ctx: LabContext, run: Run) -> None:
    reporter = run.reporter
    username = run.operation.ref.name
    namespace = lab_namespace(ctx.config.namespace_prefix, username)
    pod = object_name(username, "lab")
    reporter.info(f"Deleting the lab of {username}", progress=10)
    if ctx.kube.delete_pod(namespace, pod):
        reporter.info("Stopping the lab pod")
    wait_pod_gone(ctx.kube, reporter, namespace, pod)
    reporter.progress(50)
    existing = ctx.kube.read_namespace(namespace)
    if existing is not None and not is_ours(existing):
        # A namespace of that name the service never made (a spawn refused to use it).
        reporter.info(f"Namespace {namespace} is not the service's; leaving it alone")
    else:
        reporter.info("Removing the lab's namespace")
        ctx.kube.delete_namespace(namespace)
        wait_namespace_gone(ctx.kube, reporter, namespace)
    reporter.info("The lab is deleted", progress=90)

"""File servers as a kind of workload: a Job, its Service, ingress and policy.

A spawn puts the user's objects in place and follows the Job's pod until it is ready (the
server accepts connections) and the ingress Gafaelfawr makes from the GafaelfawrIngress
exists, so that the URL it answers with works; it fails fast when the pod cannot come up.
A Job left from an earlier server that ended (or failed) is removed first: a finished Job
never runs again. A delete removes every object and waits until the pod is gone.
"""

from __future__ import annotations

from app.builders.ingress import GAFAELFAWR_GROUP, GAFAELFAWR_INGRESSES, GAFAELFAWR_VERSION
from app.concurrency import concurrently
from app.engine.kind import Finished, Run, StepFailed
from app.engine.pods import judge
from app.engine.tracking import WorkloadTracking
from app.engine.waiting import await_pods_change
from app.models.workload import Action, WorkloadStatus
from app.storage.kubernetes import CustomKind, KubernetesError
from app.workloads.context import WorkloadContext
from app.workloads.fileserver.builders import (
    build_ingress,
    build_job,
    build_network_policy,
    build_service,
    object_name,
    selector,
)
from app.workloads.fileserver.config import FileserverConfig, fileserver_config
from app.workloads.fileserver.models import FILESERVER_KIND, RunAs
from app.workloads.fileserver.records import fileserver_json, job_finished, parse_fileserver
from app.workloads.fileserver.tracking import FileserverTracking
from app.workloads.kind import ServiceKind

JOB_KIND = CustomKind("batch", "v1", "jobs")
"""Created once and never replaced: a Job's pod template cannot change."""
INGRESS_KIND = CustomKind(GAFAELFAWR_GROUP, GAFAELFAWR_VERSION, GAFAELFAWR_INGRESSES)
BACKGROUND = "Background"
"""A Job's deletion that takes its pod with it (batch/v1 orphans it by default)."""


def _selector_text(username: str) -> str:
    return ",".join(f"{key}={value}" for key, value in selector(username).items())


class FileserverKind(ServiceKind):
    """A user's file server, named by the user in the engine."""

    name = FILESERVER_KIND

    def __init__(self, ctx: WorkloadContext) -> None:
        self._section: FileserverConfig = fileserver_config(ctx.config)
        super().__init__(ctx)

    def track(self, ctx: WorkloadContext) -> WorkloadTracking | None:
        """Followed only where file servers are enabled: elsewhere the service may not even
        read the namespace."""
        return FileserverTracking(ctx.config, ctx.kube) if self._section.enabled else None

    def timeout(self, action: Action) -> float:
        section = self._section
        return section.creation_timeout if action is Action.SPAWN else section.delete_timeout

    def spawn(self, run: Run) -> Finished:
        ctx, section, reporter = self._ctx, self._section, run.reporter
        current = run.workloads.current()
        if current is None:
            raise StepFailed("the file server's record is gone")
        record = parse_fileserver(current)
        username = record.username
        run_as = RunAs.from_spec(run.operation.spec or {})
        reporter.info(f"Starting the file server of {username}", progress=10)
        self._namespace()
        self._clear_ended_job(run, username)
        kube = ctx.kube
        concurrently(
            lambda: kube.apply("services", build_service(section, username)),
            lambda: kube.apply("networkpolicies", build_network_policy(section, username)),
            lambda: kube.apply_custom(INGRESS_KIND, build_ingress(section, username)),
        )
        try:
            kube.create_custom(JOB_KIND, build_job(ctx.config, username, run_as))
        except KubernetesError as exc:
            if exc.status == 422:
                raise StepFailed(f"Kubernetes refused the file server: {exc.message}") from None
            if exc.status != 409:
                raise
            # A running Job of this server's (a resumed spawn): followed, never replaced.
        reporter.info("The file server's objects are in place", progress=30)
        try:
            with run.waiting():
                self._await_serving(run, username)
        except StepFailed:
            self._remove(username)  # A server that cannot start leaves nothing behind.
            raise
        run.reporter.closing(f"The file server of {username} is running")
        latest = run.workloads.current() or current
        return Finished(
            fileserver_json(parse_fileserver(latest).with_status(WorkloadStatus.RUNNING))
        )

    def _namespace(self) -> None:
        """The file servers' namespace: the chart's, or made here on the first server."""
        kube, name = self._ctx.kube, self._section.namespace
        if kube.read_namespace(name) is not None:
            return
        try:
            kube.create_namespace(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            )
        except KubernetesError as exc:
            if exc.status != 409:
                raise

    def _clear_ended_job(self, run: Run, username: str) -> None:
        """Remove a Job of an earlier server that has ended or is going, and wait until it
        is gone: a finished Job runs no pod again, and one being deleted cannot be replaced."""
        kube, namespace, name = self._ctx.kube, self._section.namespace, object_name(username)
        while True:
            run.reporter.check()
            job = kube.read_tracked("jobs", namespace, name)
            if job is None:
                return
            going = bool((job.get("metadata") or {}).get("deletionTimestamp"))
            if not going and job_finished(job) is None:
                return  # Still running: this spawn resumes, or follows it.
            if not going:
                run.reporter.info("Removing the file server that ended before")
                kube.delete_object("jobs", namespace, name, propagation=BACKGROUND)
            self._await_pod_change(run, username, None)

    def _await_serving(self, run: Run, username: str) -> None:
        """Until the server's pod is ready and its ingress exists; ``StepFailed`` when the
        pod cannot come up or the Job ends first."""
        kube, namespace, name = self._ctx.kube, self._section.namespace, object_name(username)
        said_ready = False
        while True:
            run.reporter.check()
            job = kube.read_tracked("jobs", namespace, name)
            if job is None:
                raise StepFailed("the file server's Job was deleted while it started")
            ended = job_finished(job)
            if ended is not None:
                raise StepFailed(ended)
            pods, version = kube.list_pods_at(namespace, _selector_text(username))
            ready = False
            for pod in pods:
                verdict = judge(pod, "file server")
                if verdict.failure:
                    raise StepFailed(verdict.failure, verdict.reason)
                ready = ready or verdict.ready
            if ready:
                if not said_ready:
                    run.reporter.info("The file server answers", progress=70)
                    said_ready = True
                if kube.read_tracked("ingresses", namespace, name) is not None:
                    return
            self._await_pod_change(run, username, version)

    def _await_pod_change(self, run: Run, username: str, version: str | None) -> None:
        namespace, selected = self._section.namespace, _selector_text(username)
        await_pods_change(self._ctx.kube, run.reporter, namespace, selected, version)

    def delete(self, run: Run) -> Finished:
        current = run.workloads.current()
        if current is None:
            return Finished(None)
        username = parse_fileserver(current).username
        kube, namespace = self._ctx.kube, self._section.namespace
        run.reporter.info(f"Deleting the file server of {username}")
        self._remove(username)
        with run.waiting():
            while True:
                run.reporter.check()
                pods, version = kube.list_pods_at(namespace, _selector_text(username))
                if not pods:
                    break
                self._await_pod_change(run, username, version)
        run.reporter.closing(f"The file server of {username} is deleted")
        return Finished(None)

    def _remove(self, username: str) -> None:
        """Ask for the deletion of every object of the user's server (its pod goes with its
        Job)."""
        kube, namespace, name = self._ctx.kube, self._section.namespace, object_name(username)
        concurrently(
            lambda: kube.delete_custom(INGRESS_KIND, namespace, name),
            lambda: kube.delete_object("services", namespace, name),
            lambda: kube.delete_object("networkpolicies", namespace, name),
            lambda: kube.delete_object("jobs", namespace, name, propagation=BACKGROUND),
        )

    def failed_record(self, run: Run, message: str) -> str | None:
        """The record stays, failed, saying why (its objects are gone), until the watcher or
        the reconcile removes it or a new request replaces it."""
        current = run.workloads.current()
        if current is None:
            return None
        return fileserver_json(
            parse_fileserver(current).with_status(WorkloadStatus.FAILED, message)
        )

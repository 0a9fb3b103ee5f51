"""Groups' apps as a kind of workload: a Deployment, its Service, policy and ingress.

A spawn brings the app to its record, whatever came before: it makes the group's namespace
and sets its quota, applies the app's objects (creating them, or replacing them with what
the record now says: new variables, scope, size, stopped or started) and follows the app
until it is in the phase the record asks for (Ready, or Stopped), failing fast when the app
cannot get there (Error, with the reason). Creating, updating, stopping and starting an app
are all this one step. A delete removes the app's objects and waits until its pods are gone.
"""

from __future__ import annotations

from typing import Any

from app.builders import names
from app.builders.ingress import GAFAELFAWR_GROUP, GAFAELFAWR_INGRESSES, GAFAELFAWR_VERSION
from app.concurrency import concurrently
from app.engine.kind import Finished, Run, StepFailed
from app.engine.waiting import await_pods_change
from app.models.sizes import PodSize
from app.storage.kubernetes import CustomKind, KubernetesError, is_ours
from app.workloads.app.builders import (
    app_selector,
    build_deployment,
    build_group_namespace,
    build_group_quota,
    build_ingress,
    build_network_policy,
    build_service,
)
from app.workloads.app.models import AppPhase, AppRecord, AppState
from app.workloads.app.phases import app_state
from app.workloads.app.records import app_json, parse_app
from app.workloads.app.tracking import AppTracking, selector_text
from app.workloads.kind import ServiceKind
from app.workloads.refs import APP_KIND
from app.workloads.sizes import pod_size

INGRESS_KIND = CustomKind(GAFAELFAWR_GROUP, GAFAELFAWR_VERSION, GAFAELFAWR_INGRESSES)
PROGRESS = {AppPhase.STARTING: 40, AppPhase.UPDATING: 70, AppPhase.STOPPING: 70}


class AppKind(ServiceKind):
    """A group's app, named by its id in the engine."""

    name = APP_KIND
    admitted = True
    tracked_by = AppTracking

    def spawn(self, run: Run) -> Finished:
        ctx, reporter = self._ctx, run.reporter
        current = run.workloads.current()
        if current is None:
            raise StepFailed("the app's record is gone")
        record = parse_app(current)
        template = ctx.config.apps.template(record.template)
        if template is None:
            raise StepFailed(f"the app's template {record.template} is no longer configured")
        size = pod_size(ctx.config, record.size)
        if size is None:
            raise StepFailed(f"the app's size {record.size} is no longer configured")
        namespace = names.apps_namespace(ctx.config.namespace_prefix, record.group)
        reporter.info(f"{_doing(record)} app {record.id} ({record.template})", progress=10)
        self._group_namespace(run, record, namespace, size)
        kube = ctx.kube
        concurrently(
            lambda: kube.apply("services", build_service(template, record, namespace)),
            lambda: kube.apply(
                "networkpolicies", build_network_policy(ctx.config.apps, record, namespace)
            ),
            lambda: kube.apply_custom(
                INGRESS_KIND, build_ingress(ctx.config.apps, template, record, namespace)
            ),
        )
        deployment = kube.apply(
            "deployments", build_deployment(ctx.config, template, record, size, namespace)
        )
        reporter.info("The app's objects are in place", progress=30)
        with run.waiting():
            state = self._follow(run, record, deployment)
        latest = run.workloads.current() or current
        done = parse_app(latest).with_state(state)
        run.reporter.closing(f"The app is {state.phase.value}")
        return Finished(app_json(done))

    def _group_namespace(self, run: Run, record: AppRecord, namespace: str, size: PodSize) -> None:
        """The group's namespace, made on its first app, and its quota with room for one
        more pod of the group's largest app than the quota allows (a rolling update's)."""
        ctx = self._ctx
        try:
            ctx.kube.create_namespace(build_group_namespace(record.group, namespace))
        except KubernetesError as exc:
            if exc.status != 409:
                raise
            existing = ctx.kube.read_namespace(namespace)
            if existing is None or not is_ours(existing):
                raise StepFailed(f"namespace {namespace} exists and is not the service's") from None
        largest = size
        for other in group_apps(run.workloads.records(APP_KIND), record.group):
            other_size = pod_size(ctx.config, other.size)
            if other_size is not None and other_size.cpu_limit > largest.cpu_limit:
                largest = other_size
        quota = ctx.config.apps.quota_for(record.group)
        ctx.kube.apply("resourcequotas", build_group_quota(record.group, namespace, quota, largest))

    def _follow(self, run: Run, record: AppRecord, deployment: dict[str, Any]) -> AppState:
        """Until the app is in the phase its record asks for; ``StepFailed`` on Error."""
        kube, reporter = self._ctx.kube, run.reporter
        namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
        generation = int(deployment["metadata"].get("generation") or 0)
        selector = selector_text(app_selector(record.id))
        target = AppPhase.STOPPED if record.stopped else AppPhase.READY
        said: AppPhase | None = None
        while True:
            reporter.check()
            current = kube.read_tracked("deployments", namespace, name)
            if current is None:
                raise StepFailed("the app's Deployment was deleted while it started")
            pods, version = kube.list_pods_at(namespace, selector)
            state = app_state(current, pods)
            if _observed(current, generation):
                if state.phase == target and _settled(current, record):
                    return state
                if state.phase == AppPhase.ERROR:
                    raise StepFailed(state.message)
            if state.phase != said and state.phase in PROGRESS:
                reporter.info(f"The app is {state.phase.value}", progress=PROGRESS[state.phase])
                said = state.phase
            await_pods_change(self._ctx.kube, run.reporter, namespace, selector, version)

    def delete(self, run: Run) -> Finished:
        ctx = self._ctx
        current = run.workloads.current()
        if current is None:
            return Finished(None)
        record = parse_app(current)
        namespace = names.apps_namespace(ctx.config.namespace_prefix, record.group)
        name = names.app_name(record.id)
        kube = ctx.kube
        run.reporter.info(f"Deleting app {record.id}")
        concurrently(
            lambda: kube.delete_custom(INGRESS_KIND, namespace, name),
            lambda: kube.delete_object("services", namespace, name),
            lambda: kube.delete_object("networkpolicies", namespace, name),
            lambda: kube.delete_object("deployments", namespace, name),
        )
        selector = selector_text(app_selector(record.id))
        with run.waiting():
            while True:
                run.reporter.check()
                pods, version = kube.list_pods_at(namespace, selector)
                if not pods:
                    break
                await_pods_change(self._ctx.kube, run.reporter, namespace, selector, version)
        run.reporter.closing(f"App {record.id} of {record.group} deleted")
        return Finished(None)

    def failed_record(self, run: Run, message: str) -> str | None:
        """The app stays (it may run its previous pod, or be fixed by an update), in Error."""
        current = run.workloads.current()
        if current is None:
            return None
        return app_json(parse_app(current).with_state(AppState(AppPhase.ERROR, message)))


def group_apps(records: dict[str, str], group: str) -> list[AppRecord]:
    """The apps of ``group`` among ``records`` (every app's, by id)."""
    apps = [parse_app(text) for text in records.values()]
    return [app for app in apps if app.group == group]


def _doing(record: AppRecord) -> str:
    return "Stopping" if record.stopped else "Starting"


def _observed(deployment: dict[str, Any], generation: int) -> bool:
    """Whether the Deployment's status speaks of its spec as applied (or a later one)."""
    observed = int((deployment.get("status") or {}).get("observedGeneration") or 0)
    return observed >= generation


def _settled(deployment: dict[str, Any], record: AppRecord) -> bool:
    """A running app's one pod is of the current template (not the old one of an update)."""
    if record.stopped:
        return True
    status = deployment.get("status") or {}
    return int(status.get("updatedReplicas") or 0) >= 1

"""How app records follow Kubernetes between operations (see ``app.engine.tracking``).

An app is accounted for by its Deployment rather than its pod: a stopped app has no pod, and
an updating one has two. The reconcile compares records with the Deployments, and rebuilds a
record Redis lost from its Deployment's annotation. The elected watcher follows the apps'
pods, which change whenever the app's state does (a crash loop shows on its pod and on no
Deployment), and reads the app's Deployment and pods afresh to judge its phase. A Deployment
deleted behind the service's back leaves the app in Error, saying so.
"""

from __future__ import annotations

from typing import Any

from app.builders import names
from app.models.workload import WorkloadStatus
from app.workloads.app.builders import app_selector
from app.workloads.app.models import AppPhase, AppRecord, AppState
from app.workloads.app.phases import app_state
from app.workloads.app.records import app_json, parse_app, record_from_deployment
from app.workloads.kind import ServiceTracking

APP_SELECTOR = (
    f"{names.COMPONENT_LABEL}={names.APP_COMPONENT},{names.APP_LABEL},"
    f"{names.MANAGED_BY_LABEL}={names.MANAGED_BY}"
)
"""Every app's Deployment, in any group's namespace."""
GONE_MESSAGE = "the app's Deployment is gone (deleted outside the service)"


def selector_text(labels: dict[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in labels.items())


def is_deployment(obj: dict[str, Any]) -> bool:
    return "template" in (obj.get("spec") or {})


class AppTracking(ServiceTracking):
    resource = "deployments"
    watched = "pods"
    selector = APP_SELECTOR

    def owner(self, obj: dict[str, Any]) -> str | None:
        """The app's id, for its Deployment (named for it) or one of its pods, in its
        group's namespace."""
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        app_id, group = labels.get(names.APP_LABEL), labels.get(names.GROUP_LABEL)
        if not app_id or not group:
            return None
        if is_deployment(obj) and meta.get("name") != names.app_name(app_id):
            return None
        prefix = f"{self._config.namespace_prefix}-{names.APPS_NAMESPACE_INFIX}-"
        if meta.get("namespace") != f"{prefix}{group}":
            return None
        return str(app_id)

    def state(self, deployment: dict[str, Any]) -> AppState:
        """The app's phase now; its pods are read only when they may tell an error."""
        ready = int((deployment.get("status") or {}).get("readyReplicas") or 0)
        replicas = int((deployment.get("spec") or {}).get("replicas", 1) or 0)
        pods: list[dict[str, Any]] = []
        if replicas and not ready:
            meta = deployment["metadata"]
            app_id = (meta.get("labels") or {}).get(names.APP_LABEL, "")
            pods = self._kube.list_pods(meta["namespace"], selector_text(app_selector(app_id)))
        return app_state(deployment, pods)

    def assess(self, record: str, pod: dict[str, Any] | None) -> str | None:
        """The app's phase from its Deployment: ``pod`` when it is that Deployment (the
        reconcile's), else (one of its pods changed or went) read afresh."""
        current = parse_app(record)
        if current.status is not WorkloadStatus.RUNNING:
            return None
        deployment = pod if pod is not None and is_deployment(pod) else self._deployment(current)
        if deployment is None:
            state = AppState(AppPhase.ERROR, GONE_MESSAGE)
        else:
            state = self.state(deployment)
        if (state.phase, state.message) == (current.phase, current.message):
            return None
        return app_json(current.with_state(state))

    def rebuild(self, pod: dict[str, Any]) -> str | None:
        record = record_from_deployment(pod)
        if record is None:
            return None
        return app_json(record.with_state(self.state(pod)))

    def _deployment(self, record: AppRecord) -> dict[str, Any] | None:
        namespace = names.apps_namespace(self._config.namespace_prefix, record.group)
        return self._kube.read_tracked("deployments", namespace, names.app_name(record.id))

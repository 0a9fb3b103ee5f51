"""An app's phase, read from its Deployment as the apps design defines the phases."""

from __future__ import annotations

from typing import Any

from app.engine.pods import judge
from app.workloads.app.models import AppPhase, AppState


def _condition(deployment: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in (deployment.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


def app_state(deployment: dict[str, Any], pods: list[dict[str, Any]]) -> AppState:
    """The app's phase from its Deployment (and, for the reason of an error, its pods).

    As the apps design defines them: Stopping and Stopped when the app is stopped (replicas
    0) with pods still there (counted apart, as terminating) or not; Starting while no pod is
    ready; Ready with one ready pod of the current template and no other; Updating while a
    ready pod serves and its replacement is made or starts. Error
    when the app cannot come up: its pod cannot be created (the ReplicaSet's FailedCreate,
    as a quota refusal), its image cannot be pulled, it keeps crashing, or the Deployment
    made no progress within its deadline.
    """
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    replicas = int(status.get("replicas") or 0)
    ready = int(status.get("readyReplicas") or 0)
    terminating = int(status.get("terminatingReplicas") or 0)
    live = [pod for pod in pods if not (pod.get("metadata") or {}).get("deletionTimestamp")]
    if int(spec.get("replicas", 1) or 0) == 0:
        if replicas or terminating or pods:
            return AppState(AppPhase.STOPPING, "the app's pod is stopping")
        return AppState(AppPhase.STOPPED)
    failure = _condition(deployment, "ReplicaFailure")
    if failure and failure.get("status") == "True":
        return AppState(AppPhase.ERROR, f"cannot create the app's pod: {failure.get('message')}")
    for pod in live:
        verdict = judge(pod, noun="app")
        if verdict.failure and not verdict.ready:
            return AppState(AppPhase.ERROR, verdict.failure)
    progressing = _condition(deployment, "Progressing")
    if progressing and progressing.get("reason") == "ProgressDeadlineExceeded":
        return AppState(AppPhase.ERROR, f"the app did not start: {progressing.get('message')}")
    if ready == 0:
        return AppState(AppPhase.STARTING, "waiting for the app's pod to be ready")
    updated = int(status.get("updatedReplicas") or 0)
    if replicas > 1 or updated < replicas or len(live) > 1:
        return AppState(AppPhase.UPDATING, "the app's new pod is starting; the old one serves")
    return AppState(AppPhase.READY)

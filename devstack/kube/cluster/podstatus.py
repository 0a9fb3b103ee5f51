"""Small pure helpers for pod status: conditions, the QoS class, how to name a pod."""

from __future__ import annotations

from typing import Any

from .cache import Obj
from .clock import now_rfc3339


def set_condition(
    status: dict[str, Any],
    kind: str,
    value: bool,
    reason: str | None = None,
    message: str | None = None,
) -> None:
    """Set a pod condition, keeping ``lastTransitionTime`` unless the status flips."""
    wanted = "True" if value else "False"
    conditions: list[dict[str, Any]] = list(status.get("conditions") or [])
    for condition in conditions:
        if condition.get("type") == kind:
            if condition.get("status") != wanted:
                condition["lastTransitionTime"] = now_rfc3339()
            condition["status"] = wanted
            _set_or_drop(condition, "reason", reason)
            _set_or_drop(condition, "message", message)
            break
    else:
        condition = {
            "type": kind,
            "status": wanted,
            "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(),
        }
        _set_or_drop(condition, "reason", reason)
        _set_or_drop(condition, "message", message)
        conditions.append(condition)
    status["conditions"] = conditions


def _set_or_drop(target: dict[str, Any], key: str, value: str | None) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value


def qos_class(pod_spec: dict[str, Any]) -> str:
    """Guaranteed when every container's requests equal its limits, BestEffort with none at all."""
    containers = list(pod_spec.get("containers") or []) + list(pod_spec.get("initContainers") or [])
    any_set = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = {**limits, **(resources.get("requests") or {})}
        if limits or requests:
            any_set = True
        for resource in ("cpu", "memory"):
            if resource not in limits or requests.get(resource) != limits.get(resource):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def is_pod_ready(pod: Obj) -> bool:
    """Whether the pod's ``Ready`` condition is true."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False

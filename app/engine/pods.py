"""Read a workload's pod the way a person would: is it up, still coming, or stuck?

The engine's fast-failure classification: a spawn must fail within seconds when its pod
cannot succeed (an image that cannot be pulled, no node that fits, a crash loop, a failed
provisioning container), not sit until the deadline. These rules turn the pod's conditions
and container states into that verdict, worded for the workload the pod serves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.metrics import FailureReason

_PULL_FAILURES = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
_CONFIG_FAILURES = {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}


@dataclass(frozen=True)
class PodVerdict:
    """``ready`` (the workload can be reached), ``failure`` (a message a user can act on),
    or neither."""

    ready: bool = False
    failure: str | None = None
    scheduled_on: str | None = None
    initialized: bool = False
    reason: FailureReason = FailureReason.OTHER
    """What kind of failure ``failure`` is."""


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


def _container_failure(
    statuses: list[dict[str, Any]], init: bool, noun: str
) -> tuple[str, FailureReason] | None:
    for status in statuses:
        name = status.get("name", "?")
        state = status.get("state") or {}
        waiting = state.get("waiting") or {}
        reason = waiting.get("reason", "")
        detail = waiting.get("message") or ""
        if reason in _PULL_FAILURES:
            image = status.get("image", "")
            message = f"cannot pull image {image}: {reason}" + (f": {detail}" if detail else "")
            return message, FailureReason.IMAGE_PULL
        if reason == "CrashLoopBackOff":
            what = "provisioning container" if init else f"{noun} container"
            last = (status.get("lastState") or {}).get("terminated") or {}
            code = f", last exit code {last['exitCode']}" if "exitCode" in last else ""
            message = f"the {what} {name} keeps crashing (CrashLoopBackOff{code})" + (
                f": {detail}" if detail else ""
            )
            return message, FailureReason.CRASH
        if reason in _CONFIG_FAILURES:
            message = f"container {name} cannot start: {reason}" + (f": {detail}" if detail else "")
            return message, FailureReason.CRASH
        terminated = state.get("terminated") or {}
        if init and terminated and terminated.get("exitCode", 0) != 0:
            message = (
                f"provisioning container {name} failed with exit code "
                f"{terminated.get('exitCode')}"
                + (f": {terminated.get('message')}" if terminated.get("message") else "")
            )
            return message, FailureReason.CRASH
    return None


def judge(pod: dict[str, Any], noun: str = "lab") -> PodVerdict:
    """Decide what the pod's current status means for the spawn waiting on it; ``noun``
    names the workload in the failure messages."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    node = pod.get("spec", {}).get("nodeName")
    if phase in ("Failed", "Succeeded"):
        return PodVerdict(
            failure=f"the {noun} pod stopped ({phase}): {stopped_detail(pod)}",
            scheduled_on=node,
            reason=FailureReason.CRASH,
        )
    scheduled = _condition(pod, "PodScheduled")
    unschedulable = scheduled and scheduled.get("status") == "False"
    if unschedulable and scheduled.get("reason") == "Unschedulable":  # type: ignore[union-attr]
        message = scheduled.get("message") or "no node can run it"  # type: ignore[union-attr]
        return PodVerdict(
            failure=f"the {noun} cannot be scheduled: {message}",
            reason=FailureReason.UNSCHEDULABLE,
        )
    failure = _container_failure(status.get("initContainerStatuses") or [], True, noun)
    failure = failure or _container_failure(status.get("containerStatuses") or [], False, noun)
    if failure:
        return PodVerdict(failure=failure[0], scheduled_on=node, reason=failure[1])
    initialized = (_condition(pod, "Initialized") or {}).get("status") == "True"
    ready = phase == "Running" and (_condition(pod, "Ready") or {}).get("status") == "True"
    return PodVerdict(ready=ready, scheduled_on=node, initialized=initialized)


def stopped_detail(pod: dict[str, Any]) -> str:
    """Why a pod in phase Failed or Succeeded stopped: what Kubernetes says of the pod, else
    how its first container to end ended (its exit code, and the runtime's reason)."""
    status = pod.get("status") or {}
    reason, message = status.get("reason"), status.get("message")
    detail = f"{reason}: {message}" if reason and message else reason or message
    if detail:
        return str(detail)
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated:
            ended = (
                f"container {container.get('name')} exited with code {terminated.get('exitCode')}"
            )
            return ended + (f" ({terminated['reason']})" if terminated.get("reason") else "")
    return f"phase {status.get('phase')}"

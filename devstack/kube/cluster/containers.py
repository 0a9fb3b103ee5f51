"""What a simulated container does once started, decided from its spec and the active faults.

No process runs, so a container's fate is inferred: one whose image matches a ``crash_loop``
fault exits with code 1 shortly after starting; in a pod that does not restart containers, a
command of ``true``/``false``/``sleep N`` exits the way the real command would (this is how a
prepuller's "pull and exit" pods complete). Every other container runs until the pod is deleted.
"""

from __future__ import annotations

import copy
import os
import secrets
from dataclasses import dataclass
from typing import Any

from .clock import now_rfc3339


@dataclass(frozen=True)
class ExitPlan:
    """The container exits with ``code`` this many seconds after it started."""

    after: float
    code: int


def planned_exit(container: dict[str, Any], restart_policy: str) -> ExitPlan | None:
    """How a container of a run-to-completion pod ends, if its command says so."""
    if restart_policy not in ("Never", "OnFailure"):
        return None
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    if not argv:
        return None
    program = os.path.basename(argv[0])
    if program == "true":
        return ExitPlan(0.0, 0)
    if program == "false":
        return ExitPlan(0.0, 1)
    if program == "sleep" and len(argv) > 1:
        try:
            return ExitPlan(max(0.0, float(argv[1])), 0)
        except ValueError:
            return None
    return None


def new_container_id() -> str:
    return "containerd://" + secrets.token_hex(32)


def initial_status(container: dict[str, Any], reason: str) -> dict[str, Any]:
    """A container that has not been created yet."""
    return {
        "name": container.get("name"),
        "image": container.get("image"),
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "started": False,
        "state": {"waiting": {"reason": reason}},
        "lastState": {},
    }


def set_waiting(status: dict[str, Any], reason: str, message: str | None = None) -> None:
    state: dict[str, Any] = {"reason": reason}
    if message:
        state["message"] = message
    status["state"] = {"waiting": state}
    status["ready"] = False
    status["started"] = False


def set_running(status: dict[str, Any], container_id: str, ready: bool) -> None:
    status["containerID"] = container_id
    status["state"] = {"running": {"startedAt": now_rfc3339()}}
    status["ready"] = ready
    status["started"] = True


def set_terminated(status: dict[str, Any], code: int, reason: str | None = None) -> None:
    """The container has exited; ``reason`` defaults to what containerd reports for the code."""
    running = status.get("state", {}).get("running") or {}
    now = now_rfc3339()
    terminated: dict[str, Any] = {
        "exitCode": code,
        "reason": reason or ("Completed" if code == 0 else "Error"),
        "startedAt": running.get("startedAt", now),
        "finishedAt": now,
    }
    if status.get("containerID"):
        terminated["containerID"] = status["containerID"]
    status["state"] = {"terminated": terminated}
    status["ready"] = False
    status["started"] = False


def remember_last_state(status: dict[str, Any]) -> None:
    """Keep the state that just ended as ``lastState``, before the container is restarted."""
    if "terminated" in status.get("state", {}):
        status["lastState"] = copy.deepcopy(status["state"])


def is_running(status: dict[str, Any]) -> bool:
    return "running" in (status.get("state") or {})


def is_terminated(status: dict[str, Any]) -> bool:
    return "terminated" in (status.get("state") or {})


def port_number(port: Any, containers: list[dict[str, Any]]) -> int | None:
    """A port as probes and Services name it: a number, or the name of a port one of
    ``containers`` declares; None for a name none of them declares."""
    if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
        return int(port)
    for container in containers:
        for declared in container.get("ports") or []:
            if declared.get("name") == port:
                return int(declared["containerPort"])
    return None

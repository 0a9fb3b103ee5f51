"""A pod's row in ``kubectl get pods``: the server's summary of its containers.

The STATUS cell is the part worth getting right, since it is what people read: it starts from
the phase (or the pod's own reason), an init container that has not finished turns it into
``Init:<reason>`` or ``Init:<done>/<all>``, then a waiting or terminated container's reason
(``ContainerCreating``, ``CrashLoopBackOff``, ``Completed``, ``Error``, ``ExitCode:3``) wins,
and a pod being deleted is ``Terminating``. Sidecars (init containers that restart always)
count as containers once started.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .ages import age, parse_time
from .columns import AGE, NAME, Column, JsonObject, Printer, field, items, mapping, number, text

_NODE_LOST = "NodeLost"
"""The reason the node lifecycle controller gives a pod on a node that stopped answering."""

COLUMNS = (
    NAME,
    Column("Ready", description="Ready containers out of all of them."),
    Column("Status", description="A summary of the state of the pod's containers."),
    Column("Restarts", description="Restarts of its containers, and when the last one was."),
    AGE,
    Column("IP", priority=1, description="The pod's address."),
    Column("Node", priority=1, description="The node it is bound to."),
    Column("Nominated Node", priority=1, description="The node preemption made room on."),
    Column("Readiness Gates", priority=1, description="Readiness gates that are met."),
)


class _Restarts:
    """A running count of restarts and the latest time a container last ended."""

    def __init__(self) -> None:
        self.count = 0
        self.latest: datetime | None = None

    def add(self, status: JsonObject) -> None:
        self.count += number(status, "restartCount")
        last = mapping(status, "lastState")
        if "terminated" in last:
            finished = parse_time(field(last, "terminated", "finishedAt"))
            if finished is not None and (self.latest is None or finished > self.latest):
                self.latest = finished


def _is_sidecar(spec: JsonObject | None) -> bool:
    return spec is not None and spec.get("restartPolicy") == "Always"


def _condition_true(pod: JsonObject, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in items(pod, "status", "conditions")
    )


def _ended(terminated: JsonObject, prefix: str = "") -> str:
    """The reason of a terminated container, or its signal or exit code without one."""
    if terminated.get("reason"):
        return prefix + str(terminated["reason"])
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{number(terminated, 'exitCode')}"


def pod_cells(pod: JsonObject, now: float) -> list[Any]:
    status = mapping(pod, "status")
    phase = text(status, "phase")
    reason = text(status, "reason") or phase
    for condition in items(status, "conditions"):
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    init_specs = {text(c, "name"): c for c in items(pod, "spec", "initContainers")}
    total = len(items(pod, "spec", "containers"))
    total += sum(1 for spec in init_specs.values() if _is_sidecar(spec))
    ready = 0
    restarts, sidecar_restarts = _Restarts(), _Restarts()

    initializing = False
    for index, container in enumerate(items(status, "initContainerStatuses")):
        state = mapping(container, "state")
        sidecar = _is_sidecar(init_specs.get(text(container, "name")))
        restarts.add(container)
        if sidecar:
            sidecar_restarts.add(container)
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if isinstance(terminated, dict) and number(terminated, "exitCode") == 0:
            continue
        if sidecar and container.get("started") is True:
            ready += 1 if container.get("ready") else 0
            continue
        initializing = True
        if isinstance(terminated, dict):
            reason = _ended(terminated, "Init:")
        elif isinstance(waiting, dict) and text(waiting, "reason") not in ("", "PodInitializing"):
            reason = "Init:" + text(waiting, "reason")
        else:
            reason = f"Init:{index}/{len(items(pod, 'spec', 'initContainers'))}"
        break

    if not initializing or _condition_true(pod, "Initialized"):
        restarts = sidecar_restarts
        running = False
        for container in reversed(items(status, "containerStatuses")):
            state = mapping(container, "state")
            restarts.add(container)
            terminated, waiting = state.get("terminated"), state.get("waiting")
            if isinstance(waiting, dict) and text(waiting, "reason"):
                reason = text(waiting, "reason")
            elif isinstance(terminated, dict):
                reason = _ended(terminated)
            elif container.get("ready") and isinstance(state.get("running"), dict):
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running" if _condition_true(pod, "Ready") else "NotReady"

    deleting = field(pod, "metadata", "deletionTimestamp") is not None
    if deleting and text(status, "reason") == _NODE_LOST:
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"

    restarts_cell = str(restarts.count)
    if restarts.count and restarts.latest is not None:
        restarts_cell += f" ({age(restarts.latest.isoformat(), now)} ago)"
    return [
        text(pod, "metadata", "name"),
        f"{ready}/{total}",
        reason,
        restarts_cell,
        age(field(pod, "metadata", "creationTimestamp"), now),
        *_wide_cells(pod),
    ]


def _wide_cells(pod: JsonObject) -> list[str]:
    addresses = items(pod, "status", "podIPs")
    first = addresses[0] if addresses and isinstance(addresses[0], dict) else {}
    address = text(first, "ip") or text(pod, "status", "podIP")
    gates = items(pod, "spec", "readinessGates")
    gates_cell = "<none>"
    if gates:
        conditions = {text(c, "type"): c for c in reversed(items(pod, "status", "conditions"))}
        met = sum(
            1
            for gate in gates
            if field(conditions.get(text(gate, "conditionType")) or {}, "status") == "True"
        )
        gates_cell = f"{met}/{len(gates)}"
    return [
        address or "<none>",
        text(pod, "spec", "nodeName") or "<none>",
        text(pod, "status", "nominatedNodeName") or "<none>",
        gates_cell,
    ]


def pod_conditions(pod: JsonObject) -> list[JsonObject]:
    """A finished pod's row says so (``Completed``), which clients may use to hide it."""
    phase = text(pod, "status", "phase")
    if phase not in ("Succeeded", "Failed"):
        return []
    message = "all its containers succeeded" if phase == "Succeeded" else "the pod failed"
    return [{"type": "Completed", "status": "True", "reason": phase, "message": message}]


PODS = Printer(COLUMNS, pod_cells, pod_conditions)

"""Whether a pod may run on a node: the filters kube-scheduler applies, in its order.

Shared by the scheduler and the DaemonSet controller, which decide eligibility the same way.
Each filter returns the reason a real scheduler reports for a node it rejects, so the
``FailedScheduling`` message reads like one from a real cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import nodes
from .cache import Obj
from .quantities import milli, whole

SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(tolerations: Iterable[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """True if any toleration matches the taint (key, operator, value and effect)."""
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and (toleration.get("value") or "") == (
            taint.get("value") or ""
        ):
            return True
    return False


def effective_taints(node: Obj) -> list[dict[str, Any]]:
    """The node's taints, plus ``not-ready`` on a node that is not ready but lacks the taint.

    The node lifecycle controller adds that taint in a real cluster; a node created through
    the API without a kubelet never gets a Ready condition and must not attract pods either.
    """
    taints = nodes.taints(node)
    if not nodes.is_ready(node) and not any(t.get("key") == nodes.NOT_READY_TAINT for t in taints):
        taints.append({"key": nodes.NOT_READY_TAINT, "effect": "NoSchedule"})
    return taints


def untolerated_taint(
    pod_spec: dict[str, Any], node: Obj, effects: tuple[str, ...] = SCHEDULING_EFFECTS
) -> dict[str, Any] | None:
    """The first taint with one of ``effects`` the pod does not tolerate.

    Scheduling looks at NoSchedule and NoExecute; whether a running pod may stay looks at
    NoExecute only.
    """
    tolerations = pod_spec.get("tolerations") or []
    for taint in effective_taints(node):
        if taint.get("effect") in effects and not tolerates(tolerations, taint):
            return taint
    return None


def _match_expression(expression: dict[str, Any], values: dict[str, str]) -> bool:
    key = expression.get("key") or ""
    operator = expression.get("operator")
    wanted = [str(v) for v in expression.get("values") or []]
    present = key in values
    if operator == "In":
        return present and values[key] in wanted
    if operator == "NotIn":
        return not present or values[key] not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and wanted:
        try:
            actual, bound = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    return False


def _match_term(term: dict[str, Any], node: Obj) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no objects
    node_labels = nodes.labels(node)
    node_fields = {"metadata.name": nodes.node_name(node)}
    return all(_match_expression(e, node_labels) for e in expressions) and all(
        _match_expression(f, node_fields) for f in fields
    )


def matches_selector(pod_spec: dict[str, Any], node: Obj) -> bool:
    """``spec.nodeSelector`` and required node affinity both hold for the node."""
    node_labels = nodes.labels(node)
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if node_labels.get(key) != value:
            return False
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if affinity:
        terms = affinity.get("nodeSelectorTerms") or []
        if not any(_match_term(term, node) for term in terms):
            return False
    return True


def pod_requests(pod_spec: dict[str, Any]) -> dict[str, int]:
    """Effective requests: sum over containers, at least the largest init container.

    A container with only limits requests its limits, as the API server defaults it.
    """

    def requests_of(container: dict[str, Any]) -> tuple[int, int]:
        resources = container.get("resources") or {}
        amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return milli(amounts.get("cpu", 0)), whole(amounts.get("memory", 0))

    cpu = memory = 0
    for container in pod_spec.get("containers") or []:
        c, m = requests_of(container)
        cpu, memory = cpu + c, memory + m
    for container in pod_spec.get("initContainers") or []:
        c, m = requests_of(container)
        cpu, memory = max(cpu, c), max(memory, m)
    return {"cpu": cpu, "memory": memory}


def insufficient(pod_spec: dict[str, Any], node: Obj, used: list[dict[str, Any]]) -> list[str]:
    """What the node lacks for the pod, given the specs of the pods already on it."""
    alloc = nodes.allocatable(node)
    wanted = pod_requests(pod_spec)
    reasons = []
    if len(used) + 1 > whole(alloc.get("pods", 110)):
        reasons.append("Too many pods")
    taken = [pod_requests(spec) for spec in used]
    if (
        "cpu" in alloc
        and wanted["cpu"]
        and sum(t["cpu"] for t in taken) + wanted["cpu"] > milli(alloc["cpu"])
    ):
        reasons.append("Insufficient cpu")
    if (
        "memory" in alloc
        and wanted["memory"]
        and sum(t["memory"] for t in taken) + wanted["memory"] > whole(alloc["memory"])
    ):
        reasons.append("Insufficient memory")
    return reasons


def rejections(pod_spec: dict[str, Any], node: Obj, used: list[dict[str, Any]]) -> list[str]:
    """Why the pod cannot go on the node (empty when it can), as the first failing filter says."""
    if nodes.is_cordoned(node) and not tolerates(
        pod_spec.get("tolerations") or [],
        {"key": nodes.UNSCHEDULABLE_TAINT, "effect": "NoSchedule"},
    ):
        return ["node(s) were unschedulable"]
    taint = untolerated_taint(pod_spec, node)
    if taint is not None:
        return [f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"]
    if not matches_selector(pod_spec, node):
        return ["node(s) didn't match Pod's node affinity/selector"]
    return insufficient(pod_spec, node, used)


def unschedulable_message(node_count: int, reasons: dict[str, int]) -> str:
    """The message kube-scheduler gives when no node fits."""
    if node_count == 0:
        return "no nodes available to schedule pods"
    summary = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
    return (
        f"0/{node_count} nodes are available: {summary}. preemption: 0/{node_count} nodes are "
        f"available: {node_count} Preemption is not helpful for scheduling."
    )

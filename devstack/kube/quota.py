"""The ResourceQuota admission plugin, for pods: refuse a pod the namespace's quota cannot fit.

A real API server rejects such a pod at creation with 403 and a message naming the quota and
the amounts; the service must turn that into a clear spawn failure, so the emulator does the
same. Only the compute resources a lab quota uses are tracked: ``pods``, ``requests.cpu``,
``requests.memory``, ``limits.cpu``, ``limits.memory`` (and the bare ``cpu``/``memory``
aliases of the requests).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from devstack.kube import errors
from devstack.kube.quantities import parse_quantity
from devstack.kube.store import Store

_TRACKED = ("pods", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
_ALIASES = {"cpu": "requests.cpu", "memory": "requests.memory"}


def _usage(pod: dict[str, Any]) -> dict[str, Decimal]:
    """What one pod charges against a quota (init containers count at their maximum)."""
    spec = pod.get("spec") or {}
    totals: dict[str, Decimal] = {"pods": Decimal(1)}
    for kind in ("requests", "limits"):
        for resource in ("cpu", "memory"):
            key = f"{kind}.{resource}"
            containers = sum(
                (_amount(c, kind, resource) for c in spec.get("containers") or []), Decimal(0)
            )
            init = max(
                (_amount(c, kind, resource) for c in spec.get("initContainers") or []),
                default=Decimal(0),
            )
            totals[key] = max(containers, init)
    return totals


def _amount(container: dict[str, Any], kind: str, resource: str) -> Decimal:
    resources = container.get("resources") or {}
    value = (resources.get(kind) or {}).get(resource)
    if value is None and kind == "requests":
        # A container with only a limit requests that much, as the API server defaults it.
        value = (resources.get("limits") or {}).get(resource)
    return parse_quantity(value) if value is not None else Decimal(0)


def _specified(pod: dict[str, Any], key: str) -> bool:
    if key == "pods":
        return True
    kind, resource = key.split(".")
    containers = (pod.get("spec") or {}).get("containers") or []
    for container in containers:
        resources = container.get("resources") or {}
        if (resources.get(kind) or {}).get(resource) is None and (
            kind == "limits" or (resources.get("limits") or {}).get(resource) is None
        ):
            return False
    return True


def _live(pod: dict[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def _format(amount: Decimal) -> str:
    return format(amount.normalize(), "f")


def admit_pod(store: Store, namespace: str, pod: dict[str, Any]) -> None:
    """Raise 403 Forbidden if any ResourceQuota in ``namespace`` cannot take ``pod``."""
    quotas = store.list("resourcequotas", namespace)
    if not quotas:
        return
    used: dict[str, Decimal] = {key: Decimal(0) for key in _TRACKED}
    for other in store.list("pods", namespace):
        if _live(other):
            for key, value in _usage(other).items():
                used[key] += value
    requested = _usage(pod)
    name = pod["metadata"].get("name") or pod["metadata"].get("generateName", "")
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        hard = {
            _ALIASES.get(key, key): parse_quantity(value)
            for key, value in ((quota.get("spec") or {}).get("hard") or {}).items()
            if _ALIASES.get(key, key) in _TRACKED
        }
        quota_name = quota["metadata"]["name"]
        missing = sorted(key for key in hard if not _specified(pod, key))
        if missing:
            raise errors.forbidden(
                "pods", name, f"failed quota: {quota_name}: must specify {','.join(missing)}"
            )
        over = sorted(key for key, limit in hard.items() if used[key] + requested[key] > limit)
        if over:
            asked = ",".join(f"{k}={_format(requested[k])}" for k in over)
            current = ",".join(f"{k}={_format(used[k])}" for k in over)
            limited = ",".join(f"{k}={_format(hard[k])}" for k in over)
            raise errors.forbidden(
                "pods",
                name,
                f"exceeded quota: {quota_name}, requested: {asked}, used: {current}, "
                f"limited: {limited}",
            )

"""Server-side defaulting: the fields a real API server fills in on writes.

The client's models are strict, so responses must carry what a real server would send (a
DaemonSet without its status counters fails to deserialize, for one). These functions run on
every HTTP write before validation, mutate the object in place, and know nothing of HTTP.
"""

from __future__ import annotations

import base64
import itertools
import threading
from collections.abc import Callable
from typing import Any

_POD_DEFAULT_GRACE_SECONDS = 30


def service_cidr_address(n: int) -> str:
    """The ``n``-th address of the usual service range, 10.96.0.0/12."""
    return f"10.{96 + (n >> 16) % 16}.{(n >> 8) & 255}.{n & 255}"


class ClusterIPAllocator:
    """Hands out service IPs in order, never the same one twice: from 10.96.0.0/12, or from
    the range ``address`` maps counts to (a stack running processes uses loopback ones)."""

    def __init__(self, address: Callable[[int], str] = service_cidr_address) -> None:
        self._address = address
        self._counter = itertools.count(10)
        self._lock = threading.Lock()

    def allocate(self) -> str:
        with self._lock:
            n = next(self._counter)
        return self._address(n)


def _namespace(obj: dict[str, Any]) -> None:
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")
    labels = obj["metadata"].setdefault("labels", {})
    labels["kubernetes.io/metadata.name"] = obj["metadata"].get("name", "")


def _container(container: dict[str, Any]) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    image = str(container.get("image", ""))
    latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
    container.setdefault(
        "imagePullPolicy", "Always" if latest and "@" not in image else "IfNotPresent"
    )
    container.setdefault("resources", {})
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")


def _pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", _POD_DEFAULT_GRACE_SECONDS)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    for list_name in ("initContainers", "containers"):
        for container in spec.get(list_name) or []:
            _container(container)


def _pod(obj: dict[str, Any]) -> None:
    _pod_spec(obj.setdefault("spec", {}))
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos_class(obj["spec"]))


def _qos_class(spec: dict[str, Any]) -> str:
    containers = spec.get("containers") or []
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        (r.get("limits") or {}).get(k) is not None
        and (r.get("requests") or {}).get(k, (r.get("limits") or {}).get(k))
        == (r.get("limits") or {}).get(k)
        for r in resources
        for k in ("cpu", "memory")
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _secret(obj: dict[str, Any]) -> None:
    """Fold ``stringData`` into base64 ``data``; it is write-only, as upstream."""
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.get("data") or {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data
    obj.setdefault("type", "Opaque")


def _daemonset(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("revisionHistoryLimit", 10)
    strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    if strategy.get("type") == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {"maxUnavailable": 1, "maxSurge": 0})
    _pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
    status = obj.setdefault("status", {})
    for counter in (
        "currentNumberScheduled",
        "desiredNumberScheduled",
        "numberMisscheduled",
        "numberReady",
    ):
        status.setdefault(counter, 0)


def _deployment(obj: dict[str, Any]) -> None:
    """apps/v1 defaults: one replica, a 25%/25% rolling update, ten old ReplicaSets kept and
    ten minutes to progress, which is what the deployment controller then acts on."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec["strategy"] = spec.get("strategy") or {}
    strategy["type"] = strategy.get("type") or "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy["rollingUpdate"] = strategy.get("rollingUpdate") or {}
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _pod_template(spec)
    obj.setdefault("status", {})


def _pod_template(spec: dict[str, Any]) -> None:
    """A workload's pod template gets the defaults a pod gets."""
    template = spec["template"] = spec.get("template") or {}
    template["spec"] = template.get("spec") or {}
    _pod_spec(template["spec"])


def _replicaset(obj: dict[str, Any]) -> None:
    """One replica by default; ``status.replicas`` is always present (clients require it)."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    _pod_template(spec)
    obj.setdefault("status", {}).setdefault("replicas", 0)


JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")
CONTROLLER_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")
"""The labels the API server gives a Job's pod template (the unprefixed ones kept for older
clients); the selector it generates names the last."""


def _job(obj: dict[str, Any]) -> None:
    """batch/v1 defaults: one completion at a time, six retries, NonIndexed, not suspended, a
    failed or terminating pod replaced, the selector generated (``manualSelector: false``)."""
    spec = obj.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    spec.setdefault("manualSelector", False)
    _pod_template(spec)
    obj.setdefault("status", {})


def _new_job(obj: dict[str, Any]) -> None:
    """A new Job's defaults and, unless it asks for a manual selector, the generated one: its
    template labelled with its name and uid, selected by the uid. A Job without labels of its
    own takes its template's."""
    _job(obj)
    meta, spec = obj["metadata"], obj["spec"]
    if not spec["manualSelector"]:
        template_meta = spec["template"]["metadata"] = spec["template"].get("metadata") or {}
        labels = template_meta["labels"] = template_meta.get("labels") or {}
        for key in JOB_NAME_LABELS:
            labels.setdefault(key, meta.get("name", ""))
        for key in CONTROLLER_UID_LABELS:
            labels.setdefault(key, meta.get("uid", ""))
        selector = spec["selector"] = spec.get("selector") or {}
        match = selector["matchLabels"] = selector.get("matchLabels") or {}
        match.setdefault(CONTROLLER_UID_LABELS[1], meta.get("uid", ""))
    template_labels = ((spec["template"].get("metadata") or {}).get("labels")) or {}
    if not meta.get("labels") and template_labels:
        meta["labels"] = dict(template_labels)


def _event(obj: dict[str, Any]) -> None:
    obj.setdefault("type", "Normal")
    obj.setdefault("count", 1)


class Defaulter:
    """Applies per-kind defaults; holds the state some defaults need (the IP allocator)."""

    def __init__(self, cluster_ips: ClusterIPAllocator | None = None) -> None:
        self._cluster_ips = cluster_ips or ClusterIPAllocator()
        self._on_create: dict[str, Callable[[dict[str, Any]], None]] = {
            "namespaces": _namespace,
            "pods": _pod,
            "secrets": _secret,
            "services": self._service,
            "daemonsets": _daemonset,
            "deployments": _deployment,
            "replicasets": _replicaset,
            "jobs": _new_job,
            "events": _event,
            "persistentvolumeclaims": _pvc,
            "resourcequotas": _resource_quota,
            "nodes": _node,
        }
        self._on_update: dict[str, Callable[[dict[str, Any]], None]] = {
            "secrets": _secret,
            "daemonsets": _daemonset,
            "deployments": _deployment,
            "replicasets": _replicaset,
            "jobs": _job,
            "pods": _pod,
            "namespaces": _namespace,
        }

    def on_create(self, resource: str, obj: dict[str, Any]) -> None:
        handler = self._on_create.get(resource)
        if handler is not None:
            handler(obj)

    def on_update(self, resource: str, obj: dict[str, Any], current: dict[str, Any]) -> None:
        """Defaults for a replace or patch; ``current`` supplies fields users cannot clear."""
        if resource == "services":
            spec = obj.setdefault("spec", {})
            current_ip = (current.get("spec") or {}).get("clusterIP")
            if current_ip and not spec.get("clusterIP"):
                spec["clusterIP"] = current_ip
                spec["clusterIPs"] = [current_ip]
            self._service(obj)
            return
        handler = self._on_update.get(resource)
        if handler is not None:
            handler(obj)

    def _service(self, obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        if spec["type"] != "ExternalName" and not spec.get("clusterIP"):
            spec["clusterIP"] = self._cluster_ips.allocate()
            spec["clusterIPs"] = [spec["clusterIP"]]
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        obj.setdefault("status", {}).setdefault("loadBalancer", {})


def _pvc(obj: dict[str, Any]) -> None:
    obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    obj.setdefault("status", {}).setdefault("phase", "Pending")


def _resource_quota(obj: dict[str, Any]) -> None:
    hard = (obj.get("spec") or {}).get("hard") or {}
    status = obj.setdefault("status", {})
    status.setdefault("hard", dict(hard))
    status.setdefault("used", {})


def _node(obj: dict[str, Any]) -> None:
    obj.setdefault("spec", {})
    obj.setdefault("status", {})

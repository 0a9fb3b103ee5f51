"""The floor of a spawn: the Kubernetes emulator's own time for the calls one spawn makes.

The audit log records which calls a spawn made (verb, resource, namespace, name) but not
their bodies or durations. The replay takes one spawn's audited calls and the objects that
spawn created (read back from the emulator's store), and makes the same calls, in the same
order, one after another, with the real ``kubernetes`` client into a fresh namespace,
timing each. Their sum is what a spawn costs when the service adds nothing of its own.

Replayed objects lose the service's ``managed-by`` label and live in namespaces outside the
service's prefix, so the service's watcher and reconcile never mistake them for labs.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from devstack.kube.audit import AuditEntry

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
CREATED_RESOURCES = (
    "namespaces",
    "resourcequotas",
    "networkpolicies",
    "configmaps",
    "secrets",
    "services",
    "pods",
)


@dataclass
class Call:
    """One audited call, reduced to what the replay needs."""

    verb: str
    resource: str
    namespace: str
    name: str
    code: int

    @classmethod
    def from_audit(cls, entry: AuditEntry) -> Call:
        return cls(entry.verb, entry.resource, entry.namespace, entry.name, entry.code)

    def label(self) -> str:
        where = "/".join(part for part in (self.namespace, self.name) if part)
        return f"{self.verb} {self.resource} {where}".strip()


@dataclass
class Replay:
    """Durations of one replay, call by call, in seconds."""

    calls: list[tuple[str, float]] = field(default_factory=list)
    watch_seconds: float = 0.0
    """Time spent in watches, waiting for the simulated kubelet (not API time)."""

    @property
    def api_seconds(self) -> float:
        return sum(seconds for label, seconds in self.calls if not label.startswith("watch"))


def capture_objects(store: Any, namespace: str) -> dict[str, list[dict[str, Any]]]:
    """What the spawn created, per resource, oldest first (creation order)."""
    objects: dict[str, list[dict[str, Any]]] = {}
    for resource in CREATED_RESOURCES:
        if resource == "namespaces":
            found = [store.get("namespaces", None, namespace)]
        else:
            found = [
                obj
                for obj in store.list(resource, namespace)
                if (obj["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL)
            ]
        found = [copy.deepcopy(obj) for obj in found if obj is not None]
        found.sort(key=lambda o: int(o["metadata"].get("resourceVersion") or 0))
        objects[resource] = found
    return objects


def _fresh(obj: dict[str, Any], resource: str, old_ns: str, new_ns: str) -> dict[str, Any]:
    """The object as a client would send it for creation in ``new_ns``."""
    body = copy.deepcopy(obj)
    body.pop("status", None)
    meta = body["metadata"]
    keep = {"name", "namespace", "labels", "annotations", "generateName"}
    body["metadata"] = {k: v for k, v in meta.items() if k in keep}
    meta = body["metadata"]
    labels = meta.get("labels") or {}
    if MANAGED_BY_LABEL in labels:
        labels[MANAGED_BY_LABEL] = "bench-floor"
    if resource == "namespaces":
        meta["name"] = new_ns
        for key, value in list(labels.items()):
            if value == old_ns:
                labels[key] = new_ns
        body.pop("spec", None)
    else:
        meta["namespace"] = new_ns
    spec = body.get("spec") or {}
    if resource == "pods":
        spec.pop("nodeName", None)
    if resource == "services":
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
    return body


class Replayer:
    """Makes audited calls again with the real client, against the emulator."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        # Typed as Any: the calls pass plain dicts and read raw responses, as the service does.
        core: Any = k8s.CoreV1Api(api_client)
        net: Any = k8s.NetworkingV1Api(api_client)
        self._core = core
        ns_ops: dict[str, dict[str, Callable[..., Any]]] = {
            "configmaps": {
                "create": core.create_namespaced_config_map,
                "get": core.read_namespaced_config_map,
            },
            "secrets": {
                "create": core.create_namespaced_secret,
                "get": core.read_namespaced_secret,
            },
            "services": {
                "create": core.create_namespaced_service,
                "get": core.read_namespaced_service,
            },
            "resourcequotas": {
                "create": core.create_namespaced_resource_quota,
                "get": core.read_namespaced_resource_quota,
            },
            "networkpolicies": {
                "create": net.create_namespaced_network_policy,
                "get": net.read_namespaced_network_policy,
            },
            "pods": {
                "create": core.create_namespaced_pod,
                "get": core.read_namespaced_pod,
                "delete": core.delete_namespaced_pod,
                "list": core.list_namespaced_pod,
            },
            "events": {"list": core.list_namespaced_event},
        }
        self._ns_ops = ns_ops

    def replay(
        self,
        calls: list[Call],
        objects: dict[str, list[dict[str, Any]]],
        old_ns: str,
        new_ns: str,
    ) -> Replay:
        queues = {
            resource: [_fresh(o, resource, old_ns, new_ns) for o in items]
            for resource, items in objects.items()
        }
        result = Replay()
        last_pod: dict[str, Any] | None = None
        for call in calls:
            namespace = new_ns if call.namespace == old_ns else call.namespace
            name = new_ns if call.name == old_ns else call.name
            if call.verb == "watch" and call.resource == "pods":
                started = time.perf_counter()
                self._watch_ready(namespace, last_pod)
                seconds = time.perf_counter() - started
                result.watch_seconds += seconds
                result.calls.append((call.label(), seconds))
                continue
            started = time.perf_counter()
            response = self._one(call, namespace, name, queues)
            seconds = time.perf_counter() - started
            result.calls.append((call.label(), seconds))
            if call.resource == "pods" and isinstance(response, dict) and response.get("kind"):
                last_pod = response
        return result

    def _one(
        self, call: Call, namespace: str, name: str, queues: dict[str, list[dict[str, Any]]]
    ) -> Any:
        raw: dict[str, Any] = {"_preload_content": False}
        try:
            if call.resource == "namespaces":
                if call.verb == "create":
                    return _body(self._core.create_namespace(queues["namespaces"].pop(0), **raw))
                if call.verb == "get":
                    return _body(self._core.read_namespace(name, **raw))
                if call.verb == "delete":
                    return _body(self._core.delete_namespace(name, **raw))
            ops = self._ns_ops.get(call.resource, {})
            if call.verb == "create":
                return _body(ops["create"](namespace, queues[call.resource].pop(0), **raw))
            if call.verb == "get":
                return _body(ops["get"](name, namespace, **raw))
            if call.verb == "list":
                return _body(ops["list"](namespace, **raw))
            if call.verb == "delete":
                return _body(ops["delete"](name, namespace, **raw))
        except ApiException as exc:
            return {"code": exc.status}
        raise ValueError(f"the replay does not know how to make: {call.label()}")

    def _watch_ready(self, namespace: str, last_pod: dict[str, Any] | None) -> None:
        """Watch the pod from the last version read until it is ready (at most 10 s)."""
        if last_pod is None or _ready(last_pod):
            return
        name = last_pod["metadata"]["name"]
        response = self._core.list_namespaced_pod(
            namespace,
            watch=True,
            field_selector=f"metadata.name={name}",
            resource_version=last_pod["metadata"]["resourceVersion"],
            timeout_seconds=10,
            _preload_content=False,
        )
        try:
            buffer = b""
            for chunk in response.stream(amt=65536, decode_content=False):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip() and _ready(json.loads(line).get("object") or {}):
                        return
        finally:
            response.release_conn()

    def delete_namespace(self, namespace: str) -> None:
        with contextlib.suppress(ApiException):
            self._core.delete_namespace(namespace, _preload_content=False)


def _body(response: Any) -> Any:
    return json.loads(response.data) if hasattr(response, "data") else response


def _ready(pod: dict[str, Any]) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False

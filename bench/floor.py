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
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from app.storage.kubernetes import resource_path, send
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
    """Makes audited calls again with the real client, against the emulator.

    Each call goes the way the service sends its own (``app.storage.kubernetes.send``:
    the client's ``ApiClient`` without its generated endpoint methods), so the floor and
    the spawn pay the same client costs and differ only by what the service does.
    """

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self._api = api_client

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
        where = None if call.resource == "namespaces" else namespace
        methods = {"create": "POST", "get": "GET", "list": "GET", "delete": "DELETE"}
        if call.verb not in methods:
            raise ValueError(f"the replay does not know how to make: {call.label()}")
        body = queues[call.resource].pop(0) if call.verb == "create" else None
        path = resource_path(call.resource, where, name if call.verb in ("get", "delete") else None)
        try:
            return json.loads(send(self._api, methods[call.verb], path, body=body).data)
        except ApiException as exc:
            return {"code": exc.status}

    def _watch_ready(self, namespace: str, last_pod: dict[str, Any] | None) -> None:
        """Watch the pod from the last version read until it is ready (at most 10 s)."""
        if last_pod is None or _ready(last_pod):
            return
        name = last_pod["metadata"]["name"]
        query = [
            ("watch", True),
            ("fieldSelector", f"metadata.name={name}"),
            ("resourceVersion", last_pod["metadata"]["resourceVersion"]),
            ("timeoutSeconds", 10),
        ]
        response = send(self._api, "GET", resource_path("pods", namespace), query=query)
        try:
            buffer = b""
            for chunk in response.stream(amt=65536, decode_content=False):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip() and _ready(json.loads(line).get("object") or {}):
                        return
        finally:
            # Left early, the server still streams on this connection: never reuse it.
            response.close()

    def delete_namespace(self, namespace: str) -> None:
        with contextlib.suppress(ApiException):
            # Read, so the connection goes back to the pool for the next replay.
            send(self._api, "DELETE", resource_path("namespaces", None, namespace)).read()


def _ready(pod: dict[str, Any]) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False

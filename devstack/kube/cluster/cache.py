"""The cluster's own copy of the objects its controllers decide on.

Controllers consult it instead of listing the store on every decision: with hundreds of pods,
a deep-copying list per scheduling attempt would make the simulation the bottleneck of any
benchmark. It is fed by store events and by the results of the cluster's own writes, and it
only ever moves forward in ``resourceVersion`` so a late event never undoes a newer write.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)

WATCHED = (
    "namespaces",
    "nodes",
    "pods",
    "daemonsets",
    "deployments",
    "replicasets",
    "jobs",
    "services",
    "customresourcedefinitions",
)


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def _version(obj: Obj) -> int:
    raw = (obj.get("metadata") or {}).get("resourceVersion") or "0"
    try:
        return int(raw)
    except ValueError:
        return 0


class ObjectCache:
    """Latest known objects of the watched resources, keyed by resource then (namespace, name).

    Only the reactor thread touches it, so it needs no lock. Objects in it are never mutated.
    """

    def __init__(self) -> None:
        self._objects: dict[str, dict[Key, Obj]] = {resource: {} for resource in WATCHED}

    def apply(self, event_type: str, resource: str, obj: Obj) -> bool:
        """Record an event; False when it is older than what the cache already holds."""
        objects = self._objects.get(resource)
        if objects is None:
            return False
        key = key_of(obj)
        current = objects.get(key)
        if current is not None and _version(current) > _version(obj):
            return False
        if event_type == "DELETED":
            if current is not None and current.get("metadata", {}).get("uid") != obj.get(
                "metadata", {}
            ).get("uid"):
                return False
            objects.pop(key, None)
        else:
            objects[key] = obj
        return True

    def get(self, resource: str, namespace: str | None, name: str) -> Obj | None:
        return self._objects[resource].get((namespace or "", name))

    def all(self, resource: str, namespace: str | None = None) -> list[Obj]:
        objects = self._objects[resource].values()
        if namespace is None:
            return list(objects)
        return [o for o in objects if (o.get("metadata") or {}).get("namespace") == namespace]

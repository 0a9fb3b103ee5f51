"""The garbage collector: what a deleted object owned goes after it, whatever its kind.

Kubernetes deletes dependents by their ``metadata.ownerReferences``: once every owner an
object names is gone, the object is deleted too (background propagation), and an owner that
is gone is dropped from an object that still has another. The controllers' own cascades
(a Deployment's ReplicaSets, a ReplicaSet's pods) only did this for the kinds they knew; an
operator's objects (a DaskCluster owning Deployments, a Service and a DaskWorkerGroup that
owns more Deployments) need the general rule, as a real cluster applies it.

Dependents are found when their owner goes through the store's index of owner references
(``devstack.kube.owners``), not by scanning: a scan listed and copied every object of every
kind in the owner's namespace, or in every namespace for a cluster-scoped owner, so tearing
a namespace down cost a pass over the whole cluster per object in it. As a real cluster
allows, a namespaced owner only has dependents in its own namespace.

An object can also be made naming an owner that is already gone: an operator that was
making a worker group's Deployment while the group was deleted. Kubernetes' collector finds
such dependents of absent owners and deletes them as it would have when the owner went; so
does this one, when the object is added (``on_added``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .cache import Obj
from .workloads import delete_pod_gracefully
from .writer import StoreWriter

GetObject = Callable[[str, "str | None", str], "dict[str, Any] | None"]
Dependents = Callable[[str], Sequence[tuple[str, "str | None", str]]]
OwnerPresent = Callable[[dict[str, Any], "str | None"], bool]
"""Whether the owner an owner reference names exists, with that uid, beside a dependent in
that namespace (None: a cluster-scoped dependent)."""

_NEVER_OWNED = frozenset({"events"})
"""Kinds the collector leaves alone, whatever they reference."""


class GarbageCollector:
    """Deletes the dependents of deleted objects; runs on the cluster's reactor thread."""

    def __init__(
        self,
        writer: StoreWriter,
        get_object: GetObject,
        dependents: Dependents,
        kinds: Callable[[], list[tuple[str, bool]]],
        owner_present: OwnerPresent,
    ) -> None:
        """``dependents``: the store's index, owner uid to (plural, namespace, name) of the
        objects naming it; ``kinds``: every served kind, as (plural, namespaced)."""
        self._writer = writer
        self._get = get_object
        self._dependents = dependents
        self._kinds = kinds
        self._owner_present = owner_present

    def on_added(self, plural: str, obj: Obj) -> None:
        """Collect an object made after an owner it names was gone."""
        if plural in _NEVER_OWNED:
            return
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace")
        for reference in _references(obj):
            if self._owner_present(reference, namespace):
                continue
            current = self._get(plural, namespace, str(meta.get("name")))
            if current is not None and current["metadata"].get("uid") == meta.get("uid"):
                self._collect(plural, current, str(reference.get("uid")))
            return

    def on_deleted(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        found = self._dependents(str(uid))
        if not found:
            return
        namespace = meta.get("namespace")
        served = dict(self._kinds())
        for plural, dependent_namespace, name in found:
            namespaced = served.get(plural)
            if namespaced is None or plural in _NEVER_OWNED:
                continue
            if namespace is not None and (not namespaced or dependent_namespace != namespace):
                continue
            dependent = self._get(plural, dependent_namespace, name)
            if dependent is not None and any(r.get("uid") == uid for r in _references(dependent)):
                self._collect(plural, dependent, uid)

    def _collect(self, plural: str, dependent: Obj, gone: str) -> None:
        meta = dependent["metadata"]
        namespace, name = meta.get("namespace"), str(meta["name"])
        if any(r.get("uid") != gone for r in _references(dependent)):
            self._forget_owner(plural, dependent, gone)
            return
        if plural == "pods":
            delete_pod_gracefully(self._writer, dependent)
        else:
            self._writer.request_deletion(plural, namespace, name, uid=meta.get("uid"))

    def _forget_owner(self, plural: str, dependent: Obj, gone: str) -> None:
        """Another owner remains: only the reference to the one that is gone is removed."""

        def drop(current: Obj) -> bool:
            references = _references(current)
            kept = [r for r in references if r.get("uid") != gone]
            current["metadata"]["ownerReferences"] = kept
            return len(kept) != len(references)

        meta = dependent["metadata"]
        self._writer.mutate(plural, meta.get("namespace"), meta["name"], drop, uid=meta.get("uid"))


def _references(obj: Obj) -> list[dict[str, Any]]:
    return list((obj.get("metadata") or {}).get("ownerReferences") or [])

"""Which stored objects name an owner: the garbage collector's way to its dependents.

Kubernetes' garbage collector keeps a graph of owner references so that a deletion reaches
its dependents directly. Without one, every deletion meant listing (and copying) every
object of every kind in the owner's namespace, or in all namespaces for a cluster-scoped
owner such as a Namespace or a Node: a namespace of a few objects cost a scan of the whole
cluster, and tearing down hundreds of labs spent seconds of the cluster's thread there.

The store keeps this index under its own lock, on every write, so it always agrees with
what is stored; a write whose object names no owner (most of them) only costs a lookup.
"""

from __future__ import annotations

from typing import Any

Dependent = tuple[str, str | None, str]
"""(resource, namespace or None, name) of an object that names an owner."""


def owner_uids(obj: dict[str, Any]) -> frozenset[str]:
    """The uids of the owners ``obj`` references."""
    references = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return frozenset(
        str(ref["uid"]) for ref in references if isinstance(ref, dict) and ref.get("uid")
    )


class OwnerIndex:
    """Owner uid to the objects that reference it; not thread-safe (the store locks)."""

    def __init__(self) -> None:
        self._dependents: dict[str, dict[Dependent, None]] = {}
        """Per owner uid, its dependents in the order they first named it."""
        self._owners: dict[Dependent, frozenset[str]] = {}
        """Per dependent, the owners it names now (only objects that name some)."""

    def record(self, dependent: Dependent, obj: dict[str, Any] | None) -> None:
        """Note what ``dependent`` references now: ``obj`` as stored, None once deleted."""
        now = owner_uids(obj) if obj is not None else frozenset()
        before = self._owners.get(dependent, frozenset())
        if now == before:
            return
        for uid in before - now:
            dependents = self._dependents.get(uid)
            if dependents is not None:
                dependents.pop(dependent, None)
                if not dependents:
                    del self._dependents[uid]
        for uid in now - before:
            self._dependents.setdefault(uid, {})[dependent] = None
        if now:
            self._owners[dependent] = now
        else:
            self._owners.pop(dependent, None)

    def dependents(self, uid: str) -> list[Dependent]:
        """The objects that reference the owner ``uid`` now."""
        return list(self._dependents.get(uid, ()))

    def __len__(self) -> int:
        """How many stored objects name at least one owner."""
        return len(self._owners)

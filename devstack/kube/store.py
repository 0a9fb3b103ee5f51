"""The emulator's object store: every object of every kind, one resourceVersion counter.

Both halves of the emulator write here: the HTTP layer (after validation, auditing and
request faults) and the cluster simulation (controllers, scheduler, kubelet), whose writes
bypass all of that because they *are* the cluster. Every committed change is announced to
subscribers synchronously, outside the store lock and in commit order, which is what makes
watches and controllers consistent with one another.

Objects are plain JSON-like dicts. The store never hands out its own copies: everything
returned or announced is a fresh copy, so callers may mutate what they get.
"""

from __future__ import annotations

import builtins
import logging
import secrets
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from devstack.kube import errors
from devstack.kube.owners import Dependent, OwnerIndex
from devstack.kube.resources import RESOURCES

_log = logging.getLogger(__name__)

Listener = Callable[[str, str, dict], None]
"""``(event_type, resource, object)``; event_type is ``ADDED``, ``MODIFIED`` or ``DELETED``."""

ChangeListener = Callable[["Change"], None]

_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The alphabet kube-apiserver uses for ``generateName`` suffixes (no vowels, no look-alikes)."""

_GENERATE_ATTEMPTS = 8

Key = tuple[str | None, str]
Objects = list[dict]
"""A list of objects (named so ``Store.list`` does not shadow the type in annotations)."""


@dataclass(frozen=True)
class Change:
    """One committed change, as the watch machinery needs it.

    ``old`` is the object before a MODIFIED change (``None`` otherwise), so watches with
    selectors can tell an object that stopped matching from one that never matched.
    ``object`` and ``old`` are shared between change listeners and must not be mutated.
    """

    type: str
    resource: str
    object: dict[str, Any]
    old: dict[str, Any] | None
    resource_version: int


def clone(value: Any) -> Any:
    """Deep-copy JSON-like data; several times faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def now_timestamp() -> str:
    """The current time in the RFC 3339 form Kubernetes uses (whole seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_uid() -> str:
    """A fresh ``metadata.uid``."""
    return str(uuid.uuid4())


def _desired_state(obj: dict[str, Any]) -> dict[str, Any]:
    """The part of an object whose change moves ``metadata.generation``: everything but its
    metadata and status (a Pod's or a Service's ``spec``, and the fields of custom objects
    that have no ``spec``, such as a GafaelfawrIngress's ``config`` and ``template``)."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


class Store:
    """Thread-safe in-memory storage keyed by resource plural, namespace and name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[Key, dict[str, Any]]] = {}
        self._owners = OwnerIndex()
        self._version = 0
        self._listeners: list[ChangeListener] = []
        # Changes committed but not yet announced, drained in order by one thread at a time.
        self._pending: deque[Change] = deque()
        self._dispatch_lock = threading.Lock()
        self._dispatching = threading.local()

    # -- reads -----------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        """The latest committed resourceVersion (``"0"`` before any write)."""
        with self._lock:
            return str(self._version)

    def get(self, resource: str, namespace: str | None, name: str) -> dict | None:
        with self._lock:
            obj = self._objects.get(resource, {}).get((namespace, name))
            return clone(obj) if obj is not None else None

    def list(self, resource: str, namespace: str | None = None) -> Objects:
        return self.snapshot(resource, namespace)[0]

    def dependents(self, uid: str) -> builtins.list[Dependent]:
        """The objects whose ``metadata.ownerReferences`` name the owner ``uid``, as
        (resource, namespace, name): what the garbage collector deletes after it."""
        with self._lock:
            return self._owners.dependents(uid)

    def namespaced_resources(self) -> builtins.list[str]:
        """Every namespaced resource the API serves or the store holds (for the namespace
        controller, which must empty a namespace of all of them)."""
        served = [r.plural for r in RESOURCES if r.namespaced]
        with self._lock:
            held = [
                plural
                for plural, bucket in self._objects.items()
                if any(ns is not None for ns, _ in bucket)
            ]
        return served + [p for p in held if p not in served]

    def snapshot(
        self,
        resource: str,
        namespace: str | None = None,
        matches: Callable[[dict], bool] | None = None,
    ) -> tuple[Objects, int]:
        """The objects and the resourceVersion they are consistent with, read atomically.

        A list response and the start of a watch both need this pair so that a watch
        resumed from the list's version misses nothing and repeats nothing. ``matches``
        (a selector) picks objects before they are copied: a selective list among ten
        thousand pods then costs what a real API server's watch cache costs, not ten
        thousand deep copies.
        """
        with self._lock:
            bucket = self._objects.get(resource, {})
            chosen: Iterable[dict[str, Any]]
            if namespace is None:
                chosen = bucket.values()
            else:
                chosen = [o for (ns, _), o in bucket.items() if ns == namespace]
            items = [clone(o) for o in chosen if matches is None or matches(o)]
            return items, self._version

    # -- writes ----------------------------------------------------------------------------

    def create(self, resource: str, obj: dict) -> dict:
        """Store a new object. A ``uid`` already in its metadata is kept: the API server gives
        an object its uid before admission, where a Job's generated selector names it."""
        obj = clone(obj)
        meta = obj.setdefault("metadata", {})
        namespace = meta.get("namespace") or None
        with self._lock:
            bucket = self._objects.setdefault(resource, {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = self._generated_name(bucket, namespace, meta["generateName"])
            name = meta.get("name")
            if not name:
                raise errors.ApiError(
                    422,
                    "Invalid",
                    f"{resource} is invalid: metadata.name: Required value: name or "
                    "generateName is required",
                )
            if (namespace, name) in bucket:
                raise errors.already_exists(resource, name)
            self._version += 1
            meta["uid"] = meta.get("uid") or new_uid()
            meta["resourceVersion"] = str(self._version)
            meta["creationTimestamp"] = now_timestamp()
            meta["generation"] = 1
            bucket[(namespace, name)] = obj
            self._owners.record((resource, namespace, name), obj)
            result = clone(obj)
            self._pending.append(Change("ADDED", resource, clone(obj), None, self._version))
        self._dispatch()
        return result

    def load(self, resource: str, objects: builtins.list[dict]) -> int:
        """Store many new objects at once, each as ``create`` would; returns how many.

        For a simulated population (``devstack.kube.population``): a hundred thousand
        objects created one ``create`` at a time cost a lock and two copies each. Here the
        caller gives the objects up (they are stored as handed over, not copied), one lock
        covers the batch, and each change is still announced, so the cluster and open
        watches know every object as if it had been created. Every name must be set and
        free; a taken one raises 409 before anything of the batch is stored.
        """
        with self._lock:
            bucket = self._objects.setdefault(resource, {})
            keys = [
                ((o["metadata"].get("namespace") or None), o["metadata"]["name"]) for o in objects
            ]
            for key in keys:
                if key in bucket:
                    raise errors.already_exists(resource, key[1])
            if len(set(keys)) != len(keys):
                raise errors.ApiError(
                    409, "AlreadyExists", f"{resource}: a name repeats in the batch"
                )
            created = now_timestamp()
            for key, obj in zip(keys, objects, strict=True):
                self._version += 1
                meta = obj["metadata"]
                meta["uid"] = new_uid()
                meta["resourceVersion"] = str(self._version)
                meta["creationTimestamp"] = created
                meta["generation"] = 1
                bucket[key] = obj
                self._owners.record((resource, *key), obj)
                self._pending.append(Change("ADDED", resource, clone(obj), None, self._version))
        self._dispatch()
        return len(objects)

    def update(self, resource: str, obj: dict, *, expected_version: str | None = None) -> dict:
        """Replace an object whole, status included.

        ``expected_version``, when given, makes the write conditional (optimistic
        concurrency, as a PUT carrying ``metadata.resourceVersion``): a mismatch raises 409.
        ``uid`` and ``creationTimestamp`` are immutable and kept from the stored object.
        """
        obj = clone(obj)
        meta = obj.setdefault("metadata", {})
        namespace = meta.get("namespace") or None
        name = meta.get("name", "")
        with self._lock:
            bucket = self._objects.setdefault(resource, {})
            current = bucket.get((namespace, name))
            if current is None:
                raise errors.not_found(resource, name)
            cur_meta = current["metadata"]
            if expected_version is not None and expected_version != cur_meta["resourceVersion"]:
                raise errors.conflict(resource, name)
            self._version += 1
            meta["uid"] = cur_meta["uid"]
            meta["creationTimestamp"] = cur_meta["creationTimestamp"]
            meta["resourceVersion"] = str(self._version)
            generation = cur_meta.get("generation", 1)
            if _desired_state(obj) != _desired_state(current):
                generation += 1
            meta["generation"] = generation
            bucket[(namespace, name)] = obj
            self._owners.record((resource, namespace, name), obj)
            result = clone(obj)
            self._pending.append(Change("MODIFIED", resource, clone(obj), current, self._version))
        self._dispatch()
        return result

    def mutate(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        change: Callable[[dict], dict | None],
    ) -> dict:
        """Atomically read, change and write back one object.

        ``change`` receives a copy of the current object and returns the new one (or
        mutates it in place and returns ``None``). It runs under the store lock, so it must
        be quick and must not call back into the store. Raises 404 if the object is absent.
        Used where a read-then-update from another thread must not be lost in between,
        such as a PATCH racing the kubelet's status writes.
        """
        with self._lock:
            current = self._objects.get(resource, {}).get((namespace, name))
            if current is None:
                raise errors.not_found(resource, name)
            draft = clone(current)
            replacement = change(draft)
            new = replacement if replacement is not None else draft
            version = current["metadata"]["resourceVersion"]
        # The lock is dropped between reading and writing so ``update`` stays the single
        # writer path; the version check turns a concurrent write into a retry.
        try:
            return self.update(resource, new, expected_version=version)
        except errors.ApiError as exc:
            if exc.code != 409:
                raise
            return self.mutate(resource, namespace, name, change)

    def delete(self, resource: str, namespace: str | None, name: str) -> dict | None:
        with self._lock:
            bucket = self._objects.get(resource, {})
            obj = bucket.pop((namespace or None, name), None)
            if obj is None:
                return None
            self._owners.record((resource, namespace or None, name), None)
            self._version += 1
            obj["metadata"]["resourceVersion"] = str(self._version)
            result = clone(obj)
            self._pending.append(Change("DELETED", resource, obj, None, self._version))
        self._dispatch()
        return result

    # -- subscriptions ---------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(type, resource, object)`` after every committed change.

        Each call gets its own copy of the object. Returns an unsubscribe function.
        """

        def forward(change: Change) -> None:
            listener(change.type, change.resource, clone(change.object))

        return self.subscribe_changes(forward)

    def subscribe_changes(self, listener: ChangeListener) -> Callable[[], None]:
        """Like :meth:`subscribe` but with the full :class:`Change`, objects shared."""
        with self._lock:
            self._listeners = [*self._listeners, listener]

        def unsubscribe() -> None:
            with self._lock:
                self._listeners = [f for f in self._listeners if f is not listener]

        return unsubscribe

    def _dispatch(self) -> None:
        """Announce pending changes in commit order, outside the store lock.

        One thread drains at a time; a writer that finds another thread draining waits for
        it, so by the time a write returns its change has been announced. A listener that
        itself writes to the store only queues its change: the drain loop already running
        on its thread announces it next, which keeps every listener seeing the same order.
        """
        if getattr(self._dispatching, "active", False):
            return
        with self._dispatch_lock:
            self._dispatching.active = True
            try:
                while True:
                    with self._lock:
                        if not self._pending:
                            return
                        change = self._pending.popleft()
                        listeners = self._listeners
                    for listener in listeners:
                        try:
                            listener(change)
                        except Exception:
                            # One broken subscriber must not starve the others or the writer.
                            _log.exception("store listener failed on %s", change.type)
            finally:
                self._dispatching.active = False

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _generated_name(bucket: dict[Key, Any], namespace: str | None, prefix: str) -> str:
        for _ in range(_GENERATE_ATTEMPTS):
            suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))
            candidate = f"{prefix}{suffix}"
            if (namespace, candidate) not in bucket:
                return candidate
        raise errors.ApiError(
            500, "ServerTimeout", f"unable to generate a unique name from {prefix!r}"
        )

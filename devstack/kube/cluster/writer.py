"""Writes to the store on behalf of the controllers, the way a controller writes to an API server.

Every change is read-modify-write on a fresh copy, retried when the store reports a conflict,
so a status update never resurrects an object or drops a field another client set in between.
Results go into the cache at once, so the next decision already sees this write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from devstack.kube.errors import ApiError
from devstack.kube.store import clone, now_timestamp

from .cache import Obj, ObjectCache

log = logging.getLogger(__name__)

Listener = Callable[[str, str, dict[str, Any]], None]


class StoreLike(Protocol):
    """The part of ``devstack.kube.store.Store`` the cluster uses."""

    def create(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]: ...
    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...
    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]: ...
    def update(
        self, resource: str, obj: dict[str, Any], *, expected_version: str | None = None
    ) -> dict[str, Any]: ...
    def delete(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...
    def dependents(self, uid: str) -> Sequence[tuple[str, str | None, str]]: ...
    def subscribe(self, listener: Listener) -> Callable[[], None]: ...


Mutation = Callable[[Obj], bool]


class StoreWriter:
    """Store writes with conflict retries, feeding every result into the cache."""

    def __init__(self, store: StoreLike, cache: ObjectCache) -> None:
        self.store = store
        self._cache = cache

    def create(self, resource: str, obj: Obj) -> Obj | None:
        """Create ``obj``; None when the name is taken or the store refuses it."""
        try:
            created = self.store.create(resource, obj)
        except ApiError as err:
            if err.code != 409:
                log.warning("cluster could not create %s: %s", resource, err.message)
            return None
        self._cache.apply("ADDED", resource, created)
        return created

    def mutate(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        change: Mutation,
        uid: str | None = None,
    ) -> Obj | None:
        """Apply ``change`` to a fresh copy and write it if ``change`` returns True.

        Returns the object as stored afterwards, or None when it is gone (or is a different
        object of the same name than ``uid``).
        """
        for _ in range(10):
            current = self.store.get(resource, namespace, name)
            if current is None:
                return None
            if uid is not None and current.get("metadata", {}).get("uid") != uid:
                return None
            # The store's JSON copy: copy.deepcopy cost several times more per status write.
            candidate = clone(current)
            if not change(candidate):
                return current
            try:
                version = current.get("metadata", {}).get("resourceVersion")
                updated = self.store.update(resource, candidate, expected_version=version)
            except ApiError as err:
                if err.code == 409:
                    continue
                if err.code == 404:
                    return None
                raise
            self._cache.apply("MODIFIED", resource, updated)
            return updated
        log.warning("cluster gave up updating %s %s/%s after conflicts", resource, namespace, name)
        return None

    def delete(
        self, resource: str, namespace: str | None, name: str, uid: str | None = None
    ) -> bool:
        """Delete the object now; with ``uid``, only if it is still that object."""
        if uid is not None:
            current = self.store.get(resource, namespace, name)
            if current is None or current.get("metadata", {}).get("uid") != uid:
                return False
        try:
            deleted = self.store.delete(resource, namespace, name)
        except ApiError as err:
            if err.code == 404:
                return False
            raise
        if deleted is not None:
            self._cache.apply("DELETED", resource, deleted)
        return deleted is not None

    def request_deletion(
        self, resource: str, namespace: str | None, name: str, uid: str | None = None
    ) -> bool:
        """Delete the object as a controller's DELETE call does; whether it is gone now.

        An object with finalizers is only marked deleted (``deletionTimestamp``): whoever set
        them, an operator, removes them when its own clean-up is done, and the API deletes
        the object on the write that removes the last. An operator that is never shown the
        mark (kopf stops an object's timers only on it) would go on handling the object.
        """
        current = self.store.get(resource, namespace, name)
        if current is None or (uid is not None and current["metadata"].get("uid") != uid):
            return True
        if not current["metadata"].get("finalizers"):
            self.delete(resource, namespace, name, uid=uid)
            return True

        def mark(obj: Obj) -> bool:
            if obj["metadata"].get("deletionTimestamp"):
                return False
            obj["metadata"]["deletionTimestamp"] = now_timestamp()
            obj["metadata"]["deletionGracePeriodSeconds"] = 0
            return True

        return self.mutate(resource, namespace, name, mark, uid=uid) is None

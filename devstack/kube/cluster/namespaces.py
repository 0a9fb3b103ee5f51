"""The namespace controller: provisions new namespaces and empties terminating ones.

Deleting a namespace in a real cluster is not instant: it stays ``Terminating`` while its
contents are removed, and creating into it meanwhile fails. A spawner that deletes and
recreates a user's namespace must cope with that, so the delay is simulated; and while the
kubelet is set to take time stopping pods, the namespace waits for its pods as a real one
does. An object with finalizers (an operator's custom resource) is deleted the way the API
deletes it, marked and kept until its operator removes them, and holds the namespace so long:
an operator that saw it vanish unmarked would go on running timers for it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from .cache import Obj, ObjectCache
from .reactor import Reactor, Timer
from .serviceaccounts import default_service_account, root_ca_config_map
from .settings import ClusterSettings
from .writer import StoreWriter

CONTENT_RECHECK_SECONDS = 0.2
"""How often a terminating namespace looks whether its pods, and the objects its operators'
finalizers hold, are gone yet."""


class NamespaceController:
    """Creates the ``default`` ServiceAccount in new namespaces and finalizes deleted ones."""

    def __init__(
        self,
        cache: ObjectCache,
        writer: StoreWriter,
        settings: ClusterSettings,
        reactor: Reactor,
        namespaced_resources: Callable[[], list[str]],
    ) -> None:
        self._cache = cache
        self._writer = writer
        self._settings = settings
        self._reactor = reactor
        self._namespaced_resources = namespaced_resources
        self._provisioning: dict[str, Timer] = {}
        self._finalizing: dict[str, Timer] = {}
        self.removed: deque[tuple[str, float]] = deque(maxlen=10_000)
        """Each finalized namespace's name and when it was removed (``time.time()``), most
        recent last: benchmarks take the emulated terminating time out of a delete's."""

    def alive(self, name: str) -> bool:
        """The namespace exists and is not terminating, so objects may still be created in it."""
        namespace = self._cache.get("namespaces", None, name)
        return namespace is not None and not namespace["metadata"].get("deletionTimestamp")

    def on_namespace(self, event_type: str, namespace: Obj) -> None:
        name = str(namespace["metadata"]["name"])
        if event_type == "DELETED":
            for timers in (self._provisioning, self._finalizing):
                timer = timers.pop(name, None)
                if timer is not None:
                    timer.cancel()
            return
        if namespace["metadata"].get("deletionTimestamp"):
            if name not in self._finalizing:
                delay = self._settings.namespace_termination_seconds
                self._finalizing[name] = self._reactor.call_later(
                    delay, lambda: self._finalize(name)
                )
            return
        if name not in self._provisioning:
            delay = self._settings.service_account_delay_seconds
            self._provisioning[name] = self._reactor.call_later(
                delay, lambda: self._provision(name)
            )

    def stop(self) -> None:
        for timers in (self._provisioning, self._finalizing):
            for timer in timers.values():
                timer.cancel()
            timers.clear()

    def _provision(self, name: str) -> None:
        if not self.alive(name):
            return
        store = self._writer.store
        if store.get("serviceaccounts", name, "default") is None:
            self._writer.create("serviceaccounts", default_service_account(name))
        if store.get("configmaps", name, root_ca_config_map(name)["metadata"]["name"]) is None:
            self._writer.create("configmaps", root_ca_config_map(name))

    def _finalize(self, name: str) -> None:
        """Delete everything in the namespace, pods first, then the namespace itself.

        While the kubelet takes time to stop pods (``pod_termination_seconds``), pods get
        their grace period as on a real cluster, and the namespace stays until they are
        gone: a pod whose node never confirms it stopped holds its namespace until it is
        deleted with no grace period. Otherwise they go at once, with everything else but
        the objects with finalizers, which go when their finalizers are removed.
        """
        self._finalizing.pop(name, None)
        namespace = self._cache.get("namespaces", None, name)
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return
        store = self._writer.store
        if self._settings.pod_termination_seconds > 0 and self._pods_stopping(name):
            self._finalizing[name] = self._reactor.call_later(
                CONTENT_RECHECK_SECONDS, lambda: self._finalize(name)
            )
            return
        held = False
        for resource in self._ordered_resources():
            for obj in store.list(resource, name):
                meta = obj["metadata"]
                if resource == "pods":
                    self._writer.delete(resource, name, meta["name"], uid=meta.get("uid"))
                elif not self._writer.request_deletion(
                    resource, name, meta["name"], uid=meta.get("uid")
                ):
                    held = True
        if held:
            self._finalizing[name] = self._reactor.call_later(
                CONTENT_RECHECK_SECONDS, lambda: self._finalize(name)
            )
            return
        self._writer.delete("namespaces", None, name, uid=namespace["metadata"].get("uid"))
        self.removed.append((name, time.time()))

    def _pods_stopping(self, name: str) -> bool:
        """Start the graceful deletion of the namespace's pods not yet stopping; whether
        any pod is left."""
        pods = self._writer.store.list("pods", name)
        for pod in pods:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            grace = int((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
            deadline = (datetime.now(UTC) + timedelta(seconds=grace)).strftime("%Y-%m-%dT%H:%M:%SZ")

            def mark(obj: Obj, deadline: str = deadline, grace: int = grace) -> bool:
                obj["metadata"]["deletionTimestamp"] = deadline
                obj["metadata"]["deletionGracePeriodSeconds"] = grace
                return True

            self._writer.mutate("pods", name, meta["name"], mark, uid=meta.get("uid"))
        return bool(pods)

    def _ordered_resources(self) -> list[str]:
        resources = [r for r in self._namespaced_resources() if r != "namespaces"]
        rest = [r for r in resources if r not in ("pods", "events")]
        return (
            [r for r in ("pods",) if r in resources]
            + rest
            + [r for r in ("events",) if r in resources]
        )

"""The simulated cluster: scheduler, kubelets and controllers behind one ``Cluster`` object.

The API-server half of the emulator owns the store; this half reacts to what is written there
the way the control plane and the nodes of a real cluster would, and writes back statuses,
events and derived objects. All reactions run on one reactor thread fed by store events.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from devstack.kube.resources import ResourceRegistry

from . import nodes
from .addresses import LoopbackAddresses
from .cache import WATCHED, Obj, ObjectCache
from .crds import CRDS, CrdController
from .daemonsets import DaemonSetController
from .deployments import DeploymentController
from .dns import ClusterDns
from .events import EventRecorder
from .faults import PodFaults
from .garbage import GarbageCollector
from .images import add_image
from .jobs import JobController
from .kubelet import Kubelets
from .logs import PodLogs
from .namespaces import NamespaceController
from .operators import OPERATORS, Admit
from .parts import ControllerParts
from .podstatus import is_pod_ready
from .processes import ProcessRuntime
from .reactor import Reactor
from .replicasets import ReplicaSetController
from .scheduler import Scheduler
from .services import ServiceProxies
from .settings import ClusterSettings
from .writer import StoreLike, StoreWriter

T = TypeVar("T")


class Cluster:
    """Controllers, scheduler and kubelets of an emulated cluster, driven by store events."""

    def __init__(
        self,
        store: StoreLike,
        settings: ClusterSettings | None = None,
        served: ResourceRegistry | None = None,
        admit: Admit | None = None,
        addresses: LoopbackAddresses | None = None,
    ) -> None:
        """``admit`` is what the API server does to objects the simulated operators create
        (defaults such as a Service's cluster IP; a pod's quota admission)."""
        self.store = store
        self.settings = settings or ClusterSettings()
        self.served = served or ResourceRegistry()
        """What the API serves; CustomResourceDefinitions add to it."""
        self.faults = PodFaults()
        self._reactor = Reactor()
        self._cache = ObjectCache()
        self._writer = StoreWriter(store, self._cache)
        self._namespaces = NamespaceController(
            self._cache, self._writer, self.settings, self._reactor, self._namespaced_resources
        )
        self._events = EventRecorder(self._writer, self._namespaces.alive)
        self._scheduler = Scheduler(self._cache, self._writer, self._events, self.faults)
        self.addresses = addresses if addresses is not None else LoopbackAddresses()
        """The loopback block of its process-run pods and Services, claimed when needed."""
        self.dns = ClusterDns(self.addresses)
        """The names of its Services, for the processes it runs (and the stack's operators)."""
        self.processes = ProcessRuntime(self.store.get, self.addresses, self.settings, self.dns)
        self.logs = PodLogs(self.store.get, self.processes)
        """What ``GET pods/<name>/log`` answers."""
        self._kubelets = Kubelets(
            self._cache,
            self._writer,
            self._events,
            self.faults,
            self.settings,
            self._reactor,
            self.processes,
        )
        self._daemonsets = DaemonSetController(
            self._cache, self._writer, self._events, self._reactor, self._namespaces.alive
        )
        parts = ControllerParts(
            self._cache,
            self._writer,
            self._events,
            self._reactor,
            self._namespaces.alive,
            admit or _no_defaults,
        )
        self._replicasets = ReplicaSetController(parts)
        self._deployments = DeploymentController(parts)
        self._jobs = JobController(parts, self.settings)
        self._services = ServiceProxies(self._endpoints, self.addresses)
        self._crds = CrdController(self.served, self._writer, self.store.list)
        self._garbage = GarbageCollector(
            self._writer,
            self.store.get,
            self.store.dependents,
            self._served_kinds,
            self._owner_present,
        )
        self._operators = {
            operator.plural: operator(
                self._writer, self.store.list, admit or _no_defaults, self._events, self.settings
            )
            for operator in OPERATORS
        }
        self._unsubscribe: Callable[[], None] | None = None
        self._node_lock = threading.Lock()
        self._node_count = 0
        self._node_views: dict[str, tuple[object, ...]] = {}
        self.faults.on_change(lambda: self._reactor.submit(self._scheduler.retry_all))

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Subscribe to the store, then replay what it already holds as ADDED events."""
        if self._unsubscribe is not None:
            return
        self._unsubscribe = self.store.subscribe(self._on_store_event)
        self._reactor.start()
        for resource in WATCHED:
            for obj in self.store.list(resource):
                self._on_store_event("ADDED", resource, obj)

    def stop(self) -> None:
        """Stop reacting; pending delays are dropped and the worker thread is joined."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._reactor.stop()
        # The reactor thread has ended, so the components can be reset from this thread.
        self._kubelets.stop()
        self._namespaces.stop()
        self._replicasets.stop()
        self._deployments.stop()
        self._jobs.stop()
        self._services.stop()
        self.dns.stop()
        self.addresses.release()

    def namespaces_removed(self) -> list[tuple[str, float]]:
        """Recently finalized namespaces and when each was removed (``time.time()``)."""
        return list(self._namespaces.removed)

    # ---- nodes --------------------------------------------------------------------------

    def add_node(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, Any]] | None = None,
        images: list[str] | None = None,
        unschedulable: bool = False,
        ready: bool = True,
    ) -> dict[str, Any]:
        """Register a node as its kubelet would, optionally with images already cached."""
        with self._node_lock:
            index = self._node_count
            self._node_count += 1
        node = nodes.build_node(
            name, index, labels=labels, taints=taints, unschedulable=unschedulable, ready=ready
        )
        for reference in images or []:
            add_image(
                node,
                reference,
                self.settings.resolve_digest(reference),
                self.settings.default_image_size,
            )
        return self.store.create("nodes", node)

    def set_node_ready(self, name: str, ready: bool) -> dict[str, Any] | None:
        """Flip a node's Ready condition (and its not-ready taint), as a failing kubelet would."""
        return self._on_reactor(
            lambda: self._writer.mutate("nodes", None, name, lambda n: nodes.set_ready(n, ready))
        )

    def remove_node(self, name: str) -> bool:
        """Delete a node; the pods bound to it are garbage-collected."""
        return self._on_reactor(lambda: self._writer.delete("nodes", None, name))

    def _on_reactor(self, work: Callable[[], T]) -> T:
        """Run ``work`` on the reactor thread and wait for it: the cache is not thread-safe."""
        if self._unsubscribe is None or self._reactor.on_thread():
            return work()  # no other thread touches the cache now
        future: Future[T] = Future()

        def run() -> None:
            try:
                future.set_result(work())
            except BaseException as exc:
                future.set_exception(exc)

        self._reactor.submit(run)
        return future.result(timeout=10)

    # ---- plumbing -----------------------------------------------------------------------

    def _namespaced_resources(self) -> list[str]:
        """Every namespaced kind the emulator serves, custom ones included, all removed with
        their namespace."""
        return [r.plural for r in self.served.all() if r.namespaced]

    def _on_store_event(self, event_type: str, resource: str, obj: dict[str, Any]) -> None:
        """Runs on the writer's thread: only hand the event to the reactor."""
        if resource in WATCHED or resource in self._operators:
            self._reactor.submit(lambda: self._dispatch(event_type, resource, obj))
        if event_type == "DELETED":
            self._reactor.submit(lambda: self._garbage.on_deleted(obj))
        elif event_type == "ADDED" and (obj.get("metadata") or {}).get("ownerReferences"):
            self._reactor.submit(lambda: self._garbage.on_added(resource, obj))

    def _owner_present(self, reference: dict[str, Any], namespace: str | None) -> bool:
        """Whether the object ``reference`` names exists with its uid: beside the dependent,
        or (a reference across namespaces, which collects nothing) in another namespace. An
        owner of a kind the emulator does not serve counts as present."""
        api_version = str(reference.get("apiVersion") or "")
        group = api_version.rpartition("/")[0]
        uid = reference.get("uid")
        for served in self.served.all():
            if served.kind == reference.get("kind") and served.group == group:
                owner = self.store.get(
                    served.plural, namespace if served.namespaced else None, reference["name"]
                )
                if owner is not None and owner["metadata"].get("uid") == uid:
                    return True
                return served.namespaced and any(
                    o["metadata"].get("uid") == uid for o in self.store.list(served.plural)
                )
        return True

    def _served_kinds(self) -> list[tuple[str, bool]]:
        return list({r.plural: (r.plural, r.namespaced) for r in self.served.all()}.values())

    def _endpoints(self, namespace: str, selector: dict[str, str]) -> list[Obj]:
        """A Service's endpoints: Ready pods its selector matches that run as processes
        (read from the store, as the proxy's threads are not the reactor's)."""
        found = []
        for pod in self.store.list("pods", namespace):
            labels = pod["metadata"].get("labels") or {}
            if pod["metadata"].get("deletionTimestamp") or any(
                labels.get(k) != v for k, v in selector.items()
            ):
                continue
            pod_ip = str((pod.get("status") or {}).get("podIP") or "")
            if is_pod_ready(pod) and pod_ip.startswith("127."):
                found.append(pod)
        return found

    def _node_placement_changed(self, event_type: str, node: Obj) -> bool:
        name = nodes.node_name(node)
        if event_type == "DELETED":
            self._node_views.pop(name, None)
            return True
        view = nodes.placement_view(node)
        if self._node_views.get(name) == view:
            return False
        self._node_views[name] = view
        return True

    def _dispatch(self, event_type: str, resource: str, obj: Obj) -> None:
        operator = self._operators.get(resource)
        if operator is not None:
            operator.on_object(event_type, obj)
            return
        if not self._cache.apply(event_type, resource, obj):
            return  # an older version than the cluster already acted on
        if resource == "nodes" and not self._node_placement_changed(event_type, obj):
            return  # an image list or heartbeat: nothing to schedule, start or place
        if resource == "pods":
            self._scheduler.on_pod(event_type, obj)
            self._kubelets.on_pod(event_type, obj)
            self._daemonsets.on_pod(event_type, obj)
            self._replicasets.on_pod(event_type, obj)
            self._deployments.on_pod(event_type, obj)
            self._jobs.on_pod(event_type, obj)
            for operator in self._operators.values():
                operator.on_pod(event_type, obj)
        elif resource == "nodes":
            self._kubelets.on_node(event_type, obj)
            self._daemonsets.on_node(event_type, obj)
            self._scheduler.retry_all()
        elif resource == "namespaces":
            self._namespaces.on_namespace(event_type, obj)
        elif resource == "daemonsets":
            self._daemonsets.on_daemonset(event_type, obj)
        elif resource == "deployments":
            self._deployments.on_deployment(event_type, obj)
        elif resource == "replicasets":
            self._replicasets.on_replicaset(event_type, obj)
            self._deployments.on_replicaset(event_type, obj)
        elif resource == "jobs":
            self._jobs.on_job(event_type, obj)
        elif resource == "services":
            self._services.on_service(event_type, obj)
            self.dns.on_service(event_type, obj)
        elif resource == CRDS:
            self._crds.on_crd(event_type, obj)


def _no_defaults(resource: str, obj: dict[str, Any]) -> None:
    """Without the API server's defaulter, objects are stored as built."""

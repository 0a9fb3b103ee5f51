"""The DaemonSet controller: one pod per eligible node, kept in step with nodes and templates.

A prepuller built on a DaemonSet relies on a pod appearing on every node a pod could run on,
including nodes that join later, and on ``status`` telling when all of them are ready.
Pods are bound to their node with node affinity on ``metadata.name``, as the real controller
does, and the scheduler places them.
"""

from __future__ import annotations

import copy
import hashlib
import secrets
from collections.abc import Callable
from typing import Any

from . import nodes
from .cache import Obj, ObjectCache
from .events import DAEMONSET_CONTROLLER, EventRecorder
from .placement import matches_selector, untolerated_taint
from .podstatus import is_pod_ready
from .reactor import Reactor
from .workqueue import SyncQueue
from .writer import StoreWriter

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet Kubernetes uses for generated names
TEMPLATE_GENERATION = "pod-template-generation"

DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
]


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(NAME_ALPHABET) for _ in range(length))


def owner_uid(pod: Obj) -> str | None:
    for reference in pod["metadata"].get("ownerReferences") or []:
        if reference.get("kind") == "DaemonSet" and reference.get("controller"):
            return str(reference.get("uid"))
    return None


def with_daemon_tolerations(spec: dict[str, Any]) -> dict[str, Any]:
    """The pod spec plus the tolerations the controller adds to every daemon pod."""
    tolerations = list(spec.get("tolerations") or [])
    tolerations.extend(t for t in DAEMON_TOLERATIONS if t not in tolerations)
    return {**spec, "tolerations": tolerations}


def eligible(template_spec: dict[str, Any], node: Obj) -> bool:
    """A new daemon pod goes on a node that is ready, not cordoned, selected and tolerated."""
    return (
        nodes.is_ready(node)
        and not nodes.is_cordoned(node)
        and matches_selector(template_spec, node)
        and untolerated_taint(template_spec, node) is None
    )


def may_stay(template_spec: dict[str, Any], node: Obj) -> bool:
    """An existing daemon pod stays unless its node no longer matches or taints it NoExecute.

    Cordoning a node or losing readiness does not evict daemon pods, as in a real cluster.
    """
    return (
        matches_selector(template_spec, node)
        and untolerated_taint(template_spec, node, ("NoExecute",)) is None
    )


class DaemonSetController:
    """Reconciles DaemonSets whenever they, their pods or any node change (batched per turn)."""

    def __init__(
        self,
        cache: ObjectCache,
        writer: StoreWriter,
        events: EventRecorder,
        reactor: Reactor,
        namespace_alive: Callable[[str], bool],
    ) -> None:
        self._namespace_alive = namespace_alive
        self._cache = cache
        self._writer = writer
        self._events = events
        self._queue = SyncQueue(reactor, self._sync_named)

    def on_daemonset(self, event_type: str, daemonset: Obj) -> None:
        meta = daemonset["metadata"]
        if event_type == "DELETED":
            self._delete_pods_of(str(meta.get("namespace")), str(meta.get("uid")))
            return
        self._mark(str(meta.get("namespace")), str(meta["name"]))

    def on_pod(self, event_type: str, pod: Obj) -> None:
        uid = owner_uid(pod)
        if uid is None:
            return
        namespace = str(pod["metadata"].get("namespace"))
        for daemonset in self._cache.all("daemonsets", namespace):
            if daemonset["metadata"].get("uid") == uid:
                self._mark(namespace, str(daemonset["metadata"]["name"]))

    def on_node(self, event_type: str, node: Obj) -> None:
        for daemonset in self._cache.all("daemonsets"):
            self._mark(
                str(daemonset["metadata"].get("namespace")), str(daemonset["metadata"]["name"])
            )

    def _mark(self, namespace: str, name: str) -> None:
        self._queue.mark(namespace, name)

    def _sync_named(self, namespace: str, name: str) -> None:
        daemonset = self._cache.get("daemonsets", namespace, name)
        if daemonset is None or daemonset["metadata"].get("deletionTimestamp"):
            return
        if self._namespace_alive(namespace):  # no new pods in a terminating namespace
            self._reconcile(daemonset)

    def _pods_of(self, namespace: str, uid: str) -> list[Obj]:
        return [p for p in self._cache.all("pods", namespace) if owner_uid(p) == uid]

    def _delete_pods_of(self, namespace: str, uid: str) -> None:
        """Cascading deletion: the garbage collector removes pods whose owner is gone."""
        for pod in self._pods_of(namespace, uid):
            meta = pod["metadata"]
            self._writer.delete("pods", namespace, meta["name"], uid=meta.get("uid"))

    def _reconcile(self, daemonset: Obj) -> None:
        meta = daemonset["metadata"]
        namespace, uid = str(meta.get("namespace")), str(meta.get("uid"))
        generation = int(meta.get("generation") or 1)
        template = (daemonset.get("spec") or {}).get("template") or {}
        template_spec = with_daemon_tolerations(template.get("spec") or {})
        all_nodes = {nodes.node_name(n): n for n in self._cache.all("nodes")}
        wanted = {name for name, node in all_nodes.items() if eligible(template_spec, node)}
        allowed = {name for name, node in all_nodes.items() if may_stay(template_spec, node)}
        by_node: dict[str, list[Obj]] = {}
        for pod in self._pods_of(namespace, uid):
            if pod["metadata"].get("deletionTimestamp"):
                continue
            by_node.setdefault(self._target_node(pod), []).append(pod)
        for node_name, pods in by_node.items():
            keep = node_name in allowed
            for index, pod in enumerate(pods):
                outdated = pod["metadata"].get("labels", {}).get(TEMPLATE_GENERATION) != str(
                    generation
                )
                if not keep or index > 0 or outdated:
                    self._writer.delete(
                        "pods", namespace, pod["metadata"]["name"], uid=pod["metadata"].get("uid")
                    )
        for node_name in sorted(wanted):
            current = [
                p
                for p in by_node.get(node_name, [])
                if p["metadata"].get("labels", {}).get(TEMPLATE_GENERATION) == str(generation)
            ]
            if not current:
                self._create_pod(daemonset, node_name, generation)
        desired = wanted | (allowed & set(by_node))
        self._update_status(daemonset, desired, generation)

    @staticmethod
    def _target_node(pod: Obj) -> str:
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            return str(spec["nodeName"])
        affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or {}
        for term in affinity.get("nodeSelectorTerms") or []:
            for field in term.get("matchFields") or []:
                if field.get("key") == "metadata.name" and field.get("values"):
                    return str(field["values"][0])
        return ""

    def _create_pod(self, daemonset: Obj, node_name: str, generation: int) -> None:
        meta = daemonset["metadata"]
        template = copy.deepcopy((daemonset.get("spec") or {}).get("template") or {})
        pod_meta = template.get("metadata") or {}
        spec = template.get("spec") or {}
        labels = dict(pod_meta.get("labels") or {})
        labels[TEMPLATE_GENERATION] = str(generation)
        revision = hashlib.sha256(f"{meta.get('uid')}/{generation}".encode()).hexdigest()[:10]
        labels["controller-revision-hash"] = revision
        affinity = spec.setdefault("affinity", {})
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node_name]}
                        ]
                    }
                ]
            }
        }
        spec["tolerations"] = with_daemon_tolerations(spec)["tolerations"]
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        for _ in range(5):
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{meta['name']}-{random_suffix()}",
                    "namespace": meta.get("namespace"),
                    "labels": labels,
                    "annotations": dict(pod_meta.get("annotations") or {}),
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "DaemonSet",
                            "name": meta["name"],
                            "uid": meta.get("uid"),
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": spec,
                "status": {"phase": "Pending"},
            }
            created = self._writer.create("pods", pod)
            if created is not None:
                message = f"Created pod: {created['metadata']['name']}"
                about = {**daemonset, "kind": "DaemonSet", "apiVersion": "apps/v1"}
                self._events.normal(about, DAEMONSET_CONTROLLER, "SuccessfulCreate", message)
                return

    def _update_status(self, daemonset: Obj, wanted: set[str], generation: int) -> None:
        meta = daemonset["metadata"]
        pods = [
            p
            for p in self._pods_of(str(meta.get("namespace")), str(meta.get("uid")))
            if not p["metadata"].get("deletionTimestamp")
        ]
        scheduled = {self._target_node(p) for p in pods if (p.get("spec") or {}).get("nodeName")}
        ready_nodes = {self._target_node(p) for p in pods if is_pod_ready(p)}
        updated_nodes = {
            self._target_node(p)
            for p in pods
            if p["metadata"].get("labels", {}).get(TEMPLATE_GENERATION) == str(generation)
            and (p.get("spec") or {}).get("nodeName")
        }
        ready = len(ready_nodes & wanted)
        status: dict[str, Any] = {
            "currentNumberScheduled": len(scheduled & wanted),
            "desiredNumberScheduled": len(wanted),
            "numberMisscheduled": len(scheduled - wanted),
            "numberReady": ready,
            "numberAvailable": ready,
            "updatedNumberScheduled": len(updated_nodes & wanted),
            "observedGeneration": generation,
        }
        if len(wanted) - ready:
            status["numberUnavailable"] = len(wanted) - ready

        def write(current: Obj) -> bool:
            previous = dict(current.get("status") or {})
            merged = {k: v for k, v in previous.items() if k in ("conditions", "collisionCount")}
            merged.update(status)
            if merged == previous:
                return False
            current["status"] = merged
            return True

        self._writer.mutate(
            "daemonsets", meta.get("namespace"), meta["name"], write, uid=meta.get("uid")
        )

"""What every simulated operator shares: members made from templates, kept at their counts.

An operator turns one custom object into pods and Services and keeps them so: a member whose
pod is deleted is made again (as the Deployment, StatefulSet or operator behind it would), the
workers follow the requested count, and the object's status says how things stand. Here each
operator is a class that says, for one object, which members it wants (:class:`Member`) and
what its status is; :class:`OperatorSimulation` does the rest, on the cluster's reactor thread,
after every change of the object or of one of its pods.

Objects are created as the API server would create them: defaults applied, owner references
set, and pods admitted by the namespace's ResourceQuota. A pod the quota cannot take is not
made; a Warning ``FailedCreate`` Event on the custom object says why (as a ReplicaSet's or an
operator's does), and the next reconcile of the object tries again.

An operator whose objects make no pods (Gafaelfawr's, whose GafaelfawrIngress becomes an
Ingress) implements the smaller :class:`Operator` alone: the cluster needs only ``on_object``.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devstack.kube.errors import ApiError

from ..cache import Obj
from ..events import EventRecorder, Source
from ..settings import ClusterSettings
from ..writer import StoreWriter

Admit = Callable[[str, dict[str, Any]], None]
"""What the API server does to an object about to be created, (resource, object): its
defaults, and a pod's quota admission, which raises the API's 403."""
ListObjects = Callable[[str, "str | None"], list[dict[str, Any]]]

MEMBER_ANNOTATION = "emulator.devstack/member"
"""Which member of its cluster a pod is (the simulation's own bookkeeping, never read by a
client: real operators tell their pods apart by the Deployment or StatefulSet behind each)."""


@dataclass
class Member:
    """One pod a cluster wants: its stable identity, how to name a new pod of it, its labels
    and its pod spec."""

    key: str
    """Stays the same when the pod is made again (a Deployment's name, a StatefulSet's ordinal)."""
    name: Callable[[], str]
    labels: dict[str, str]
    spec: dict[str, Any]
    annotations: dict[str, str] = field(default_factory=dict)


class Operator(ABC):
    """What the cluster asks of a simulated operator: which custom resource it reconciles,
    and what it does when one of its objects changes (``on_object``) or any pod does
    (``on_pod``, for operators whose objects own pods). Runs on the cluster's reactor thread."""

    plural: str
    group: str
    version: str
    kind: str

    def __init__(
        self,
        writer: StoreWriter,
        list_objects: ListObjects,
        admit: Admit,
        events: EventRecorder | None = None,
        settings: ClusterSettings | None = None,
    ) -> None:
        self._writer = writer
        self._list = list_objects
        self._admit = admit
        self._events = events
        self._settings = settings or ClusterSettings()

    @abstractmethod
    def on_object(self, event_type: str, obj: Obj) -> None:
        """React to an object of ``plural`` being added, modified or deleted."""

    def on_pod(self, event_type: str, pod: Obj) -> None:  # noqa: B027 - an optional hook
        """React to a pod's change; nothing unless the operator's objects own pods."""

    def owner_reference(self, owner: Obj) -> dict[str, Any]:
        """The reference that makes ``owner`` the controller of an object it creates."""
        meta = owner["metadata"]
        return {
            "apiVersion": f"{self.group}/{self.version}",
            "kind": self.kind,
            "name": meta["name"],
            "uid": meta.get("uid"),
            "controller": True,
            "blockOwnerDeletion": True,
        }


class OperatorSimulation(Operator):
    """Reconciles objects of one custom resource into pods and Services."""

    # ---- what an operator says ----------------------------------------------------------

    def cluster_selector(self, obj: Obj) -> dict[str, str]:
        """Labels every pod and Service of this object carries: by default the owner label."""
        return {self.owner_label: str(obj["metadata"]["name"])}

    @abstractmethod
    def members(self, obj: Obj, current: list[Obj]) -> list[Member]:
        """The pods ``obj`` wants now; ``current`` are its live pods (workers to keep)."""

    @abstractmethod
    def services(self, obj: Obj) -> list[dict[str, Any]]:
        """The Services ``obj`` wants (metadata.name, labels and spec)."""

    @abstractmethod
    def status(self, obj: Obj, pods: list[Obj], services: list[Obj]) -> dict[str, Any]:
        """The status to write, from the pods and Services as they are."""

    def owner_of(self, pod: Obj) -> str | None:
        """The name of the object a pod belongs to, if it is one of this operator's."""
        labels = pod["metadata"].get("labels") or {}
        return labels.get(self.owner_label)

    owner_label: str
    """The label whose value names the object a pod belongs to."""

    # ---- events ---------------------------------------------------------------------------

    def on_object(self, event_type: str, obj: Obj) -> None:
        meta = obj["metadata"]
        namespace, name = str(meta.get("namespace")), str(meta["name"])
        if event_type == "DELETED" or meta.get("deletionTimestamp"):
            self._remove_all(namespace, name)
            return
        self.reconcile(namespace, name)

    def on_pod(self, event_type: str, pod: Obj) -> None:
        owner = self.owner_of(pod)
        if owner is not None:
            self.reconcile(str(pod["metadata"].get("namespace")), owner)

    # ---- reconcile ------------------------------------------------------------------------

    def reconcile(self, namespace: str, name: str) -> None:
        obj = self._get(namespace, name)
        if obj is None:
            return
        selector = self.cluster_selector(obj)
        # Services first: members may be told where a Service is.
        existing = {s["metadata"]["name"] for s in self._owned("services", namespace, selector)}
        for service in self.services(obj):
            if service["metadata"]["name"] not in existing:
                self._create("services", obj, service)
        pods = self._owned("pods", namespace, selector)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        wanted = self.members(obj, live)
        by_key = {m.key: m for m in wanted}
        have: set[str] = set()
        for pod in live:
            key = (pod["metadata"].get("annotations") or {}).get(MEMBER_ANNOTATION, "")
            if key in by_key and key not in have:
                have.add(key)
            else:
                self._writer.delete("pods", namespace, pod["metadata"]["name"])
        for member in wanted:
            if member.key not in have:
                self._create_pod(obj, member)
        pods = self._owned("pods", namespace, selector)
        services = self._owned("services", namespace, selector)
        self._write_status(obj, self.status(obj, pods, services))

    def _get(self, namespace: str, name: str) -> Obj | None:
        return self._writer.store.get(self.plural, namespace, name)

    def _owned(self, resource: str, namespace: str, selector: dict[str, str]) -> list[Obj]:
        found = []
        for obj in self._list(resource, namespace):
            labels = obj["metadata"].get("labels") or {}
            if all(labels.get(k) == v for k, v in selector.items()):
                found.append(obj)
        return found

    def _create_pod(self, owner: Obj, member: Member) -> None:
        metadata = {
            "name": member.name(),
            "labels": dict(member.labels),
            "annotations": {**member.annotations, MEMBER_ANNOTATION: member.key},
        }
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}
        pod["spec"] = copy.deepcopy(member.spec)
        try:
            self._create("pods", owner, pod)
        except ApiError as exc:
            if self._events is not None:
                message = f"Error creating: {exc.message}"
                self._events.warning(owner, Source(self.kind), "FailedCreate", message)

    def _create(self, resource: str, owner: Obj, obj: dict[str, Any]) -> None:
        obj["metadata"]["namespace"] = owner["metadata"].get("namespace")
        obj["metadata"]["ownerReferences"] = [self.owner_reference(owner)]
        self._admit(resource, obj)
        self._writer.create(resource, obj)

    def _write_status(self, obj: Obj, status: dict[str, Any]) -> None:
        meta = obj["metadata"]

        def change(current: Obj) -> bool:
            merged = {**(current.get("status") or {}), **status}
            if merged == current.get("status"):
                return False
            current["status"] = merged
            return True

        self._writer.mutate(
            self.plural, meta.get("namespace"), meta["name"], change, meta.get("uid")
        )

    def _remove_all(self, namespace: str, name: str) -> None:
        """What garbage collection does for the owner references: everything of it goes."""
        for resource in ("pods", "services"):
            for obj in self._list(resource, namespace):
                owners = obj["metadata"].get("ownerReferences") or []
                if any(o.get("kind") == self.kind and o.get("name") == name for o in owners):
                    self._writer.delete(resource, namespace, obj["metadata"]["name"])


def member_keys(pods: list[Obj]) -> list[str]:
    """The member each pod is, in the order given."""
    return [str((p["metadata"].get("annotations") or {}).get(MEMBER_ANNOTATION, "")) for p in pods]

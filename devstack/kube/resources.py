"""The registry of resource kinds the emulator serves.

One entry per resource says where it lives in the URL space (group, version, plural), whether
it is namespaced, which subresources it has, and the few behaviours that differ between kinds
on a real API server (which kinds return the deleted object, which name rule applies). Routing,
discovery, validation and defaulting all read it, so adding a built-in kind is one line.

Custom resources join at run time: each emulator has its own :class:`ResourceRegistry`, the
built-in kinds plus those its CustomResourceDefinitions define (``cluster/crds.py``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class PrinterColumn:
    """One of a CRD version's ``additionalPrinterColumns``: a column of ``kubectl get``."""

    name: str
    type: str
    json_path: str
    description: str = ""
    format: str = ""
    priority: int = 0


@dataclass(frozen=True)
class ResourceType:
    """One served resource, e.g. ``pods`` in ``core/v1``."""

    plural: str
    kind: str
    group: str
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    returns_deleted_object: bool = False
    """Whether DELETE answers with the object (pods, services...) or a ``Status``."""
    label_name: bool = False
    """Whether names must be DNS-1123 labels (63 chars) rather than subdomains (253)."""
    schema: dict[str, Any] | None = None
    """A custom resource's ``openAPIV3Schema`` (None for built-in kinds, checked against the
    official schemas)."""
    categories: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    """A custom resource's columns in tables, after its name (from its CRD)."""
    verbs: tuple[str, ...] = ALL_VERBS
    """What the resource answers: every verb, or ``create`` alone for a review that is
    evaluated and answered, never stored."""

    @property
    def custom(self) -> bool:
        """Whether a CustomResourceDefinition defines this resource."""
        return self.schema is not None

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def api_resource(self) -> dict[str, Any]:
        """The ``APIResource`` entry of this resource in a discovery document."""
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        return entry


_RBAC = "rbac.authorization.k8s.io"

RESOURCES: tuple[ResourceType, ...] = (
    ResourceType(
        "namespaces",
        "Namespace",
        "",
        "v1",
        namespaced=False,
        short_names=("ns",),
        subresources=("status",),
        returns_deleted_object=True,
        label_name=True,
    ),
    ResourceType(
        "pods",
        "Pod",
        "",
        "v1",
        namespaced=True,
        short_names=("po",),
        subresources=("status", "log"),
        returns_deleted_object=True,
        categories=("all",),
    ),
    ResourceType("configmaps", "ConfigMap", "", "v1", namespaced=True, short_names=("cm",)),
    ResourceType("secrets", "Secret", "", "v1", namespaced=True),
    ResourceType(
        "services",
        "Service",
        "",
        "v1",
        namespaced=True,
        short_names=("svc",),
        subresources=("status",),
        returns_deleted_object=True,
        label_name=True,
        categories=("all",),
    ),
    ResourceType(
        "serviceaccounts",
        "ServiceAccount",
        "",
        "v1",
        namespaced=True,
        short_names=("sa",),
        subresources=("token",),
        returns_deleted_object=True,
    ),
    ResourceType(
        "resourcequotas",
        "ResourceQuota",
        "",
        "v1",
        namespaced=True,
        short_names=("quota",),
        subresources=("status",),
        returns_deleted_object=True,
    ),
    ResourceType(
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        "",
        "v1",
        namespaced=True,
        short_names=("pvc",),
        subresources=("status",),
        returns_deleted_object=True,
    ),
    ResourceType("events", "Event", "", "v1", namespaced=True, short_names=("ev",)),
    ResourceType(
        "nodes", "Node", "", "v1", namespaced=False, short_names=("no",), subresources=("status",)
    ),
    ResourceType(
        "daemonsets",
        "DaemonSet",
        "apps",
        "v1",
        namespaced=True,
        short_names=("ds",),
        subresources=("status",),
        categories=("all",),
    ),
    ResourceType(
        "deployments",
        "Deployment",
        "apps",
        "v1",
        namespaced=True,
        short_names=("deploy",),
        subresources=("status",),
        categories=("all",),
    ),
    ResourceType(
        "replicasets",
        "ReplicaSet",
        "apps",
        "v1",
        namespaced=True,
        short_names=("rs",),
        subresources=("status",),
        categories=("all",),
    ),
    ResourceType(
        "jobs",
        "Job",
        "batch",
        "v1",
        namespaced=True,
        subresources=("status",),
        categories=("all",),
    ),
    ResourceType(
        "networkpolicies",
        "NetworkPolicy",
        "networking.k8s.io",
        "v1",
        namespaced=True,
        short_names=("netpol",),
    ),
    ResourceType(
        "ingresses",
        "Ingress",
        "networking.k8s.io",
        "v1",
        namespaced=True,
        short_names=("ing",),
        subresources=("status",),
    ),
    ResourceType("roles", "Role", _RBAC, "v1", namespaced=True),
    ResourceType("rolebindings", "RoleBinding", _RBAC, "v1", namespaced=True),
    ResourceType("clusterroles", "ClusterRole", _RBAC, "v1", namespaced=False),
    ResourceType("clusterrolebindings", "ClusterRoleBinding", _RBAC, "v1", namespaced=False),
    ResourceType(
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        "authorization.k8s.io",
        "v1",
        namespaced=False,
        verbs=("create",),
    ),
    ResourceType(
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        "authorization.k8s.io",
        "v1",
        namespaced=False,
        verbs=("create",),
    ),
    ResourceType(
        "customresourcedefinitions",
        "CustomResourceDefinition",
        "apiextensions.k8s.io",
        "v1",
        namespaced=False,
        short_names=("crd", "crds"),
        subresources=("status",),
    ),
)

BUILT_IN_PLURALS = frozenset(r.plural for r in RESOURCES)


class _Table:
    """Everything served at one moment, indexed for the lookups every request makes; never
    changed once built."""

    def __init__(self, served: tuple[ResourceType, ...]) -> None:
        self.resources = served
        self.by_path = {(r.group, r.version, r.plural): r for r in served}
        self.by_plural = {r.plural: r for r in served}


class ResourceRegistry:
    """The resources one emulator serves: the built-in kinds and, as CustomResourceDefinitions
    come and go, custom ones.

    Plurals are unique across everything served (a CRD whose plural is taken is not
    established), which lets the store and the watches name a resource by its plural alone.
    Readers see a consistent table without taking a lock: each change replaces it whole.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._table = _Table(RESOURCES)

    def all(self) -> tuple[ResourceType, ...]:
        return self._table.resources

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The resource served at ``/api[s]/<group>/<version>/<plural>``, if any."""
        return self._table.by_path.get((group, version, plural))

    def by_plural(self, plural: str) -> ResourceType | None:
        return self._table.by_plural.get(plural)

    def group_versions(self) -> list[tuple[str, str]]:
        """Every served ``(group, version)``, core first."""
        seen: list[tuple[str, str]] = []
        for resource in self._table.resources:
            pair = (resource.group, resource.version)
            if pair not in seen:
                seen.append(pair)
        return seen

    def resources_in(self, group: str, version: str) -> list[ResourceType]:
        return [r for r in self._table.resources if r.group == group and r.version == version]

    def serve(self, resource: ResourceType) -> bool:
        """Serve a custom resource, or replace the one of its plural; False (and nothing
        changes) when a built-in kind or another group's resource has the plural."""
        with self._lock:
            current = self.by_plural(resource.plural)
            if current is not None and (not current.custom or current.group != resource.group):
                return False
            kept = [r for r in self._table.resources if r.plural != resource.plural]
            self._table = _Table((*kept, resource))
            return True

    def withdraw(self, plural: str) -> None:
        """Stop serving a custom resource."""
        with self._lock:
            kept = [r for r in self._table.resources if r.plural != plural or not r.custom]
            self._table = _Table(tuple(kept))

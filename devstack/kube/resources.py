"""The registry of resource kinds the emulator serves.

One entry per resource says where it lives in the URL space (group, version, plural), whether
it is namespaced, which subresources it has, and the few behaviours that differ between kinds
on a real API server (which kinds return the deleted object, which name rule applies). Routing,
discovery, validation and defaulting all read this table, so adding a kind is one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def api_resource(self) -> dict[str, Any]:
        """The ``APIResource`` entry of this resource in a discovery document."""
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": verbs,
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        return entry


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
    ),
    ResourceType(
        "serviceaccounts",
        "ServiceAccount",
        "",
        "v1",
        namespaced=True,
        short_names=("sa",),
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
    ),
    ResourceType(
        "networkpolicies",
        "NetworkPolicy",
        "networking.k8s.io",
        "v1",
        namespaced=True,
        short_names=("netpol",),
    ),
)

_BY_PATH: dict[tuple[str, str, str], ResourceType] = {
    (r.group, r.version, r.plural): r for r in RESOURCES
}


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    """The resource served at ``/api[s]/<group>/<version>/<plural>``, if any."""
    return _BY_PATH.get((group, version, plural))


_BY_PLURAL: dict[str, ResourceType] = {r.plural: r for r in RESOURCES}


def by_plural(plural: str) -> ResourceType | None:
    """The resource with this plural name (plurals are unique among served kinds)."""
    return _BY_PLURAL.get(plural)


def group_versions() -> list[tuple[str, str]]:
    """Every served ``(group, version)``, core first."""
    seen: list[tuple[str, str]] = []
    for resource in RESOURCES:
        pair = (resource.group, resource.version)
        if pair not in seen:
            seen.append(pair)
    return seen


def resources_in(group: str, version: str) -> list[ResourceType]:
    return [r for r in RESOURCES if r.group == group and r.version == version]

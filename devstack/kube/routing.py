"""Turning a request path and method into what a Kubernetes API request means.

kube-apiserver's URL space is regular enough to parse by hand:

    /api/v1[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]
    /apis/{group}/{version}[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]

The one ambiguity, ``/api/v1/namespaces/{name}/status`` (the namespace's own subresource)
versus ``/api/v1/namespaces/{ns}/{resource}``, is settled by the namespace kind's list of
subresources.
"""

from __future__ import annotations

from dataclasses import dataclass

from devstack.kube.resources import ResourceRegistry, ResourceType

_VERBS_BY_METHOD = {
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
}


_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True)
class RequestInfo:
    """The parsed meaning of one resource request."""

    verb: str
    resource: ResourceType
    namespace: str | None
    name: str | None
    subresource: str


class NotRoutable(Exception):
    """The path names no resource the emulator serves."""


def parse(served: ResourceRegistry, method: str, path: str, *, watch: bool) -> RequestInfo:
    """Parse an API path against what is ``served``; raises :class:`NotRoutable` for anything
    unknown."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise NotRoutable(path)
    namespace: str | None = None
    if (
        rest[:1] == ["namespaces"]
        and len(rest) >= 3
        and (group or rest[2] not in _NAMESPACE_SUBRESOURCES)
    ):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise NotRoutable(path)
    resource = served.lookup(group, version, rest[0])
    if resource is None:
        raise NotRoutable(path)
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else ""
    if subresource and subresource not in resource.subresources:
        raise NotRoutable(path)
    if namespace is not None and not resource.namespaced:
        raise NotRoutable(path)
    return RequestInfo(_verb(method, name, watch=watch), resource, namespace, name, subresource)


def _verb(method: str, name: str | None, *, watch: bool) -> str:
    if method == "GET":
        if watch:
            return "watch"
        return "get" if name else "list"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return _VERBS_BY_METHOD.get(method, method.lower())

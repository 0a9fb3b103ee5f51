"""Discovery documents (``/version``, ``/api``, ``/apis``, ``/api/v1``...), built from the
resource registry so they always describe exactly what the emulator serves."""

from __future__ import annotations

from typing import Any

from devstack.kube.resources import ResourceRegistry

KUBERNETES_VERSION = "v1.33.0"
"""The version the emulator claims to be; matches the schemas it validates against."""

_SUBRESOURCE_VERBS = {"log": ["get"], "token": ["create"]}
"""What a subresource answers when it is not the usual read and write of part of an object."""


def version_info() -> dict[str, Any]:
    major, minor, _ = KUBERNETES_VERSION.lstrip("v").split(".")
    return {
        "major": major,
        "minor": minor,
        "gitVersion": KUBERNETES_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def core_versions() -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    }


def _group(served: ResourceRegistry, name: str) -> dict[str, Any]:
    versions = [
        {"groupVersion": f"{name}/{version}", "version": version}
        for group, version in served.group_versions()
        if group == name
    ]
    return {"name": name, "versions": versions, "preferredVersion": versions[0]}


def group_list(served: ResourceRegistry) -> dict[str, Any]:
    names = sorted({group for group, _ in served.group_versions() if group})
    groups = [_group(served, n) for n in names]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(served: ResourceRegistry, name: str) -> dict[str, Any] | None:
    if not any(g == name for g, _ in served.group_versions()):
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(served, name)}


def resource_list(served: ResourceRegistry, group_name: str, version: str) -> dict[str, Any] | None:
    found = served.resources_in(group_name, version)
    if not found:
        return None
    entries: list[dict[str, Any]] = []
    for resource in found:
        entries.append(resource.api_resource())
        for sub in resource.subresources:
            entries.append(
                {
                    "name": f"{resource.plural}/{sub}",
                    "singularName": "",
                    "namespaced": resource.namespaced,
                    "kind": resource.kind,
                    "verbs": _SUBRESOURCE_VERBS.get(sub, ["get", "patch", "update"]),
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group_name}/{version}" if group_name else version,
        "resources": entries,
    }

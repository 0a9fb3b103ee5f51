"""OpenAPI v3, as kube-apiserver publishes it: ``/openapi/v3`` lists one document per served
group-version, ``/openapi/v3/api/v1`` or ``/openapi/v3/apis/<group>/<version>`` holds it.

kubectl reads these for ``explain`` (a kind is found through its paths'
``x-kubernetes-group-version-kind``, its fields in ``components.schemas``), for client-side
validation and for the strategic merge patch of a client-side ``apply`` (a patch operation
that takes ``application/strategic-merge-patch+json``; its merge keys and strategies from the
schemas' ``x-kubernetes-patch-*``).

Built-in kinds' schemas are the Kubernetes project's published ones as ``kubernetes-validate``
ships them (JSON Schema, converted back to OpenAPI: references into ``components``, no
nullable type lists, a reference beside a description wrapped in ``allOf``). A custom resource's
is its CustomResourceDefinition's ``openAPIV3Schema``, with the ``apiVersion``, ``kind`` and
``metadata`` the API server adds to it. Paths come from what the emulator serves, so a document
always describes exactly the kinds and verbs it answers. Documents are built on first request
and kept until what their group-version serves changes.
"""

from __future__ import annotations

import functools
import json
import threading
from importlib import resources as importlib_resources
from typing import Any

from devstack.kube.resources import ResourceRegistry, ResourceType
from devstack.kube.validation import SCHEMA_VERSION

JsonObject = dict[str, Any]

_SCHEMAS = "#/components/schemas/"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_PATCH = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
_WRITE_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation")
_NESTED = ("properties", "patternProperties")
_SUBSCHEMAS = ("items", "additionalProperties", "not")
_SCHEMA_LISTS = ("allOf", "oneOf", "anyOf")


def path_of(group: str, version: str) -> str:
    """A group-version's key in the ``/openapi/v3`` listing (``api/v1``, ``apis/apps/v1``)."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


class OpenApi:
    """The OpenAPI v3 documents of one emulator's API."""

    def __init__(self, served: ResourceRegistry) -> None:
        self._served = served
        self._lock = threading.Lock()
        self._built: dict[str, tuple[tuple[ResourceType, ...], bytes]] = {}

    def listing(self) -> JsonObject:
        """``/openapi/v3``: where each group-version's document is."""
        paths = {}
        for group, version in self._served.group_versions():
            key = path_of(group, version)
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}"}
        return {"paths": paths}

    def document(self, key: str) -> bytes | None:
        """The JSON of ``/openapi/v3/<key>``; None for a group-version not served."""
        for group, version in self._served.group_versions():
            if path_of(group, version) == key:
                break
        else:
            return None
        resources = tuple(self._served.resources_in(group, version))
        with self._lock:
            cached = self._built.get(key)
            if cached is not None and cached[0] == resources:
                return cached[1]
        built = json.dumps(_document(resources), separators=(",", ":")).encode()
        with self._lock:
            self._built[key] = (resources, built)
        return built


def _document(resources: tuple[ResourceType, ...]) -> JsonObject:
    schemas: JsonObject = {}
    paths: JsonObject = {}
    for resource in resources:
        name, schema = _kind_schema(resource)
        if schema is None:
            continue
        schemas[name] = schema
        paths.update(_paths(resource, name))
    _add_referenced(schemas)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _kind_schema(resource: ResourceType) -> tuple[str, JsonObject | None]:
    gvk = {"group": resource.group, "version": resource.version, "kind": resource.kind}
    if resource.schema is None:
        name = _by_kind().get((resource.group, resource.version, resource.kind), "")
        return name, _published().get(name)
    reversed_group = ".".join(reversed(resource.group.split(".")))
    schema = _converted(resource.schema)
    properties = dict(schema.get("properties") or {})
    # The fields every object has, described as the API server describes them for any kind.
    common = _published()["io.k8s.api.core.v1.ConfigMap"]["properties"]
    for field in ("apiVersion", "kind", "metadata"):
        properties[field] = common[field]
    schema["properties"] = properties
    schema["x-kubernetes-group-version-kind"] = [gvk]
    return f"{reversed_group}.{resource.version}.{resource.kind}", schema


def _paths(resource: ResourceType, name: str) -> JsonObject:
    prefix = path_of(resource.group, resource.version)
    namespace = "/namespaces/{namespace}" if resource.namespaced else ""
    collection = f"/{prefix}{namespace}/{resource.plural}"
    gvk = {"group": resource.group, "version": resource.version, "kind": resource.kind}
    body = {"$ref": _SCHEMAS + name}
    verbs = set(resource.verbs)

    def operation(action: str, parameters: tuple[str, ...] = (), **more: Any) -> JsonObject:
        return {
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [
                {"name": p, "in": "query", "schema": {"type": "string"}} for p in parameters
            ],
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": body}}}
            },
            **more,
        }

    request = {"content": {"application/json": {"schema": body}}, "required": True}
    patch_types = [t for t in _PATCH_TYPES if resource.schema is None or "strategic" not in t]
    patch_body = {"content": {t: {"schema": {"$ref": _SCHEMAS + _PATCH}} for t in patch_types}}
    on_collection: JsonObject = {}
    if "list" in verbs:
        on_collection["get"] = operation("list")
    if "create" in verbs:
        on_collection["post"] = operation("post", _WRITE_PARAMETERS, requestBody=request)
    if "deletecollection" in verbs:
        on_collection["delete"] = operation("deletecollection")
    on_item: JsonObject = {}
    if "get" in verbs:
        on_item["get"] = operation("get")
    if "update" in verbs:
        on_item["put"] = operation("put", _WRITE_PARAMETERS, requestBody=request)
    if "patch" in verbs:
        on_item["patch"] = operation(
            "patch", (*_WRITE_PARAMETERS, "force"), requestBody={**patch_body, "required": True}
        )
    if "delete" in verbs:
        on_item["delete"] = operation("delete")
    found = {collection: on_collection, f"{collection}/{{name}}": on_item}
    return {path: operations for path, operations in found.items() if operations}


def _add_referenced(schemas: JsonObject) -> None:
    """Add every published schema the ones in ``schemas`` refer to, and theirs in turn."""
    published = _published()
    pending = list(schemas.values())
    while pending:
        for name in _references(pending.pop()):
            if name not in schemas and name in published:
                schemas[name] = published[name]
                pending.append(published[name])


def _references(node: Any) -> set[str]:
    if isinstance(node, list):
        return set().union(*(_references(item) for item in node))
    if not isinstance(node, dict):
        return set()
    found = {node["$ref"].removeprefix(_SCHEMAS)} if isinstance(node.get("$ref"), str) else set()
    return found.union(*(_references(value) for value in node.values()))


@functools.cache
def _published() -> dict[str, JsonObject]:
    """Every definition of the published schemas, as OpenAPI v3 component schemas."""
    root = importlib_resources.files("kubernetes_validate").joinpath(
        "kubernetes-json-schema", f"v{SCHEMA_VERSION}-local", "_definitions.json"
    )
    definitions: dict[str, JsonObject] = json.loads(root.read_text())["$defs"]
    converted = {name: _converted(schema) for name, schema in definitions.items()}
    for schema in converted.values():
        if "x-kubernetes-group-version-kind" in schema:
            # The JSON Schema conversion pins apiVersion and kind to their one value; the
            # API's own schemas leave them plain strings.
            for field in ("apiVersion", "kind"):
                (schema.get("properties") or {}).get(field, {}).pop("enum", None)
    return converted


@functools.cache
def _by_kind() -> dict[tuple[str, str, str], str]:
    """Which published definition is each kind's, by group, version and kind."""
    found = {}
    for name, schema in _published().items():
        kinds = schema.get("x-kubernetes-group-version-kind") or []
        if len(kinds) == 1:
            gvk = kinds[0]
            found[(gvk["group"], gvk["version"], gvk["kind"])] = name
    return found


def _converted(node: Any) -> Any:
    """A JSON Schema node as an OpenAPI v3 schema (a fresh copy)."""
    if not isinstance(node, dict):
        return node
    result: JsonObject = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            result[key] = _SCHEMAS + value.rsplit("/", 1)[-1]
        elif key == "type" and isinstance(value, list):
            kept = [t for t in value if t != "null"]
            result[key] = kept[0] if len(kept) == 1 else kept
        elif key in _NESTED and isinstance(value, dict):
            result[key] = {name: _converted(schema) for name, schema in value.items()}
        elif key in _SUBSCHEMAS:
            result[key] = _converted(value)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            result[key] = [_converted(item) for item in value]
        else:
            result[key] = value
    if "$ref" in result and len(result) > 1:
        # OpenAPI 3.0 ignores whatever stands beside a reference: the API server wraps it.
        result["allOf"] = [{"$ref": result.pop("$ref")}]
    return result

"""A flat view of the OpenAPI document for the browsable docs page.

The page is rendered by a template without scripts or external assets, so everything it
shows is resolved here: types named, references followed, parameters of a path merged into
each of its operations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FieldRow:
    name: str
    type: str
    required: bool
    description: str


@dataclass(frozen=True)
class ResponseRow:
    status: str
    description: str
    content_type: str
    schema: str
    schema_ref: str
    headers: tuple[FieldRow, ...]
    codes: tuple[str, ...]
    events: tuple[FieldRow, ...]


@dataclass(frozen=True)
class OperationView:
    anchor: str
    method: str
    path: str
    summary: str
    description: str
    access: str
    parameters: tuple[FieldRow, ...]
    request_schema: str
    request_ref: str
    request_fields: tuple[FieldRow, ...]
    responses: tuple[ResponseRow, ...]


@dataclass(frozen=True)
class SchemaView:
    name: str
    description: str
    fields: tuple[FieldRow, ...]


@dataclass(frozen=True)
class DocsPage:
    title: str
    version: str
    description: str
    operations: tuple[OperationView, ...]
    schemas: tuple[SchemaView, ...]


def _ref_name(schema: Mapping[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return str(ref).rsplit("/", 1)[-1] if ref else None


def type_label(schema: Mapping[str, Any]) -> str:
    """A short human name for a schema object: ``string``, ``array of Group``, ``LabOptions``."""
    name = _ref_name(schema)
    if name:
        return name
    if "allOf" in schema:
        return " + ".join(type_label(part) for part in schema["allOf"])
    kind = str(schema.get("type", "any"))
    if kind == "array":
        return f"array of {type_label(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        return f"object of {type_label(schema['additionalProperties'])}"
    if "enum" in schema:
        return f"{kind}: one of {', '.join(str(v) for v in schema['enum'] if v is not None)}"
    if schema.get("format"):
        return f"{kind} ({schema['format']})"
    return kind + (" or null" if schema.get("nullable") else "")


def _field_rows(schema: Mapping[str, Any], components: Mapping[str, Any]) -> tuple[FieldRow, ...]:
    name = _ref_name(schema)
    if name:
        schema = components.get(name, {})
    required = set(schema.get("required", ()))
    return tuple(
        FieldRow(key, type_label(prop), key in required, str(prop.get("description", "")))
        for key, prop in schema.get("properties", {}).items()
    )


def _first_media(content: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The one content type and media object of a body (the service never negotiates)."""
    for content_type, media in content.items():
        return str(content_type), media
    return "", {}


def _access(op: Mapping[str, Any]) -> str:
    grants = op.get("x-required-grants")
    if not grants:
        return "none"
    return " or ".join(
        g["scope"]
        + (f" (the default of {g['setting']})" if g.get("setting") else "")
        + (" (the path's user must be the caller)" if g["sameUser"] else "")
        for g in grants
    )


def _response_row(status: str, response: Mapping[str, Any]) -> ResponseRow:
    content_type, media = _first_media(response.get("content", {}))
    schema = media.get("schema")
    return ResponseRow(
        status=status,
        description=str(response.get("description", "")),
        content_type=content_type,
        schema=type_label(schema) if schema else "",
        schema_ref=(_ref_name(schema) or "") if schema else "",
        headers=tuple(
            FieldRow(name, "string", False, str(header.get("description", "")))
            for name, header in response.get("headers", {}).items()
        ),
        codes=tuple(media.get("examples", {})),
        events=tuple(
            FieldRow(kind, "event", False, text)
            for kind, text in response.get("x-event-types", {}).items()
        ),
    )


def _operation_view(
    path: str,
    method: str,
    op: Mapping[str, Any],
    shared: tuple[Mapping[str, Any], ...],
    components: Mapping[str, Any],
) -> OperationView:
    request_type, request_media = _first_media(op.get("requestBody", {}).get("content", {}))
    request_schema = request_media.get("schema", {})
    return OperationView(
        anchor=str(op.get("operationId", f"{method}-{path}")),
        method=method.upper(),
        path=path,
        summary=str(op.get("summary", "")),
        description=str(op.get("description", "")),
        access=_access(op),
        parameters=tuple(
            FieldRow(
                f"{p['name']} ({p['in']})",
                type_label(p.get("schema", {})),
                bool(p.get("required")),
                str(p.get("description", "")),
            )
            for p in (*shared, *op.get("parameters", ()))
        ),
        request_schema=f"{type_label(request_schema)} ({request_type})" if request_type else "",
        request_ref=_ref_name(request_schema) or "",
        request_fields=_field_rows(request_schema, components),
        responses=tuple(_response_row(k, v) for k, v in op.get("responses", {}).items()),
    )


def page_model(spec: Mapping[str, Any]) -> DocsPage:
    """Flatten the document into what the docs page shows, in path order."""
    components = spec.get("components", {}).get("schemas", {})
    operations = tuple(
        _operation_view(path, method, op, tuple(items.get("parameters", ())), components)
        for path, items in sorted(spec.get("paths", {}).items())
        for method, op in items.items()
        if method != "parameters"
    )
    schemas = tuple(
        SchemaView(name, str(body.get("description", "")), _field_rows(body, components))
        for name, body in sorted(components.items())
    )
    info = spec.get("info", {})
    return DocsPage(
        title=str(info.get("title", "")),
        version=str(info.get("version", "")),
        description=str(info.get("description", "")),
        operations=operations,
        schemas=schemas,
    )

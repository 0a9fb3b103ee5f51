"""The service's OpenAPI 3 document, generated from the routes themselves.

The document is built by walking ``app.url_map`` at run time, so a route cannot exist without
appearing in it: paths and typed path parameters come from the URL rules and converters, the
summary from the view's docstring, the security requirement from ``requires``'s
``required_grants``, and bodies and error responses from a small declaration attached with
``@documented``.

Errors are declared as the ``ServiceError`` classes a view can raise rather than as status
codes, so each documented response carries the class's machine-readable ``code`` and the one
``ErrorSchema`` body the error handler actually renders. The 401, 403 and 503 responses every
authenticated route can give (no token, wrong scope or user, Gafaelfawr down) are added from the
route's grants, and 500 from the catch-all handler, so no declaration has to remember them.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, TypeVar

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin, resolver
from apispec.ext.marshmallow.common import resolve_schema_cls
from flask import Flask
from marshmallow import Schema
from werkzeug.routing import Rule, parse_converter_args
from werkzeug.routing.converters import (
    AnyConverter,
    BaseConverter,
    FloatConverter,
    IntegerConverter,
    PathConverter,
    UnicodeConverter,
    UUIDConverter,
)

from app.errors import (
    AuthenticationError,
    DependencyUnavailableError,
    PermissionDeniedError,
    ServiceError,
)
from app.schemas.errors import ErrorSchema
from app.schemas.health import NotReadySchema
from app.services.auth import TOKEN_HEADER, Grant
from app.storage.events import EventType

F = TypeVar("F", bound=Callable[..., Any])

SchemaLike = type[Schema] | Schema | Mapping[str, Any]
"""A marshmallow schema (class or instance) or a literal OpenAPI schema object."""

OPENAPI_VERSION = "3.0.3"
SECURITY_SCHEME = "bearer"
ERROR_SCHEMA_NAME = "Error"
DOC_ATTRIBUTE = "openapi_doc"
"""Where ``@documented`` leaves its ``RouteDoc`` on the view function."""

_SKIPPED_METHODS = frozenset({"HEAD", "OPTIONS"})
"""Methods Flask adds to every rule by itself; they say nothing about the API."""

_AUTH_ERRORS: tuple[type[ServiceError], ...] = (
    AuthenticationError,
    PermissionDeniedError,
    DependencyUnavailableError,
)
"""What ``requires`` itself can raise: no or bad token, wrong scope or user, Gafaelfawr down."""

_ALWAYS_ERRORS: tuple[type[ServiceError], ...] = (ServiceError,)
"""The catch-all handler turns any unexpected failure into a 500 ``internal_error``."""

_PARAMETER_DESCRIPTIONS = {
    "username": "The lab's user: a Gafaelfawr username (lowercase letters, digits and '-').",
}
"""Descriptions of path parameters that mean the same thing on every route."""

_SSE_EVENTS: Mapping[EventType, str] = {
    EventType.INFO: "A human-readable step of the operation; data is the message.",
    EventType.PROGRESS: "Progress of the operation; data is a percentage from 0 to 100.",
    EventType.ERROR: "A problem worth showing the user; data is the message.",
    EventType.COMPLETE: "The operation succeeded; data is empty. The stream then closes.",
    EventType.FAILED: "The operation failed; data is the reason. The stream then closes.",
}
"""Every event type a lab event stream can carry (the test checks none is missing)."""


@dataclass(frozen=True)
class Body:
    """A response (or request) body that needs more than "JSON of this schema".

    ``headers`` maps response header names to their descriptions; ``extensions`` adds
    ``x-`` keys to the response object for tools (and the docs page) that understand them.
    """

    description: str
    schema: SchemaLike | None = None
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)
    example: Any = None
    extensions: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Header:
    """A request header a route reads (path parameters come from the URL rule instead)."""

    name: str
    description: str
    pattern: str | None = None
    required: bool = False


@dataclass(frozen=True)
class RouteDoc:
    """What the code cannot tell by itself about one view: bodies and the errors it raises."""

    summary: str | None = None
    description: str | None = None
    request: SchemaLike | None = None
    responses: Mapping[int, SchemaLike | Body | None] = field(default_factory=dict)
    errors: tuple[type[ServiceError], ...] = ()
    params: Mapping[str, str] = field(default_factory=dict)
    headers: tuple[Header, ...] = ()


def documented(
    *,
    request: SchemaLike | None = None,
    responses: Mapping[int, SchemaLike | Body | None] | None = None,
    errors: Iterable[type[ServiceError]] = (),
    params: Mapping[str, str] | None = None,
    headers: Sequence[Header] = (),
    summary: str | None = None,
    description: str | None = None,
) -> Callable[[F], F]:
    """Attach a ``RouteDoc`` to a view, which the document generator reads.

    ``responses`` maps success statuses to a schema, a ``Body`` or ``None`` (no body);
    ``errors`` lists the ``ServiceError`` classes the view or its services raise beyond the
    authentication errors ``requires`` already implies. ``summary`` and ``description``
    default to the docstring's first line and the rest. The view is returned unchanged, so
    the decorator works above or below ``@requires`` (``functools.wraps`` copies it across).
    """
    doc = RouteDoc(
        summary=summary,
        description=description,
        request=request,
        responses=dict(responses or {}),
        errors=tuple(errors),
        params=dict(params or {}),
        headers=tuple(headers),
    )

    def decorate(view: F) -> F:
        setattr(view, DOC_ATTRIBUTE, doc)
        return view

    return decorate


# Bodies shared by declarations. --------------------------------------------------------


USERNAMES: Mapping[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "description": "Usernames that have a lab in any state.",
}


NOT_READY = Body(
    description="Not ready (code `not_ready`): Redis or the Kubernetes API did not answer.",
    schema=NotReadySchema,
    example={
        "code": "not_ready",
        "message": "not ready: redis unavailable",
        "checks": {"redis": "unavailable", "kubernetes": "ok"},
    },
)


def _event_stream_description() -> str:
    lines = [
        "Server-sent events of the lab's current operation (spawn or delete). The stream "
        "replays from the start of the operation, then follows it, and closes after a "
        "`complete` or `failed` event. Each event has an `id` to resume from with the "
        "`Last-Event-ID` header. Comment lines keep the connection alive.",
        "",
        "Event types:",
    ]
    lines.extend(f"- `{kind.value}`: {text}" for kind, text in _SSE_EVENTS.items())
    return "\n".join(lines)


EVENT_STREAM = Body(
    description=_event_stream_description(),
    schema={"type": "string"},
    content_type="text/event-stream",
    headers={"Cache-Control": "Always `no-cache`: every stream is live."},
    example=(
        ": stream of lab events\n\n"
        "id: 1700000000000-0\nevent: info\ndata: Lab creation requested\n\n"
        "id: 1700000000001-0\nevent: progress\ndata: 50\n\n"
        "id: 1700000000002-0\nevent: complete\ndata: \n\n"
    ),
    extensions={"x-event-types": {kind.value: text for kind, text in _SSE_EVENTS.items()}},
)

LAST_EVENT_ID = Header(
    "Last-Event-ID",
    "Resume after this event id instead of replaying the whole operation.",
    pattern=r"^\d+-\d+$",
)

DELEGATED_TOKEN = Header(
    TOKEN_HEADER,
    "Gafaelfawr's delegated notebook token, added by the ingress; it becomes the lab's "
    "token and must belong to the same user as the bearer token.",
)

SPAWN_REDIRECT = Body(
    "Spawn queued; follow `Location` for the lab's status.",
    headers={"Location": "`/spawner/v1/labs/{username}`."},
)

SPAWN_FORM = Body(
    "An HTML fragment for JupyterHub's spawn page: the images (prepulled ones as radio "
    "buttons, the recommended one first and selected; every other one in a dropdown), the "
    "sizes this user may have, and the debug and reset switches. Field names are the keys of "
    "the spawn request's `options`. A user who may not spawn gets a paragraph saying why.",
    schema={"type": "string"},
    content_type="text/html",
    example='<div class="lab-spawner-form">...</div>',
)

# Reading the routes. -----------------------------------------------------------------------


def route_doc(endpoint: str, view: Callable[..., Any]) -> RouteDoc | None:
    """The view's ``@documented`` declaration, if it has one."""
    doc = getattr(view, DOC_ATTRIBUTE, None)
    return doc if isinstance(doc, RouteDoc) else None


def route_grants(view: Callable[..., Any]) -> tuple[Grant, ...]:
    """The grants ``requires`` recorded on the view; empty for an unauthenticated route."""
    return tuple(getattr(view, "required_grants", ()))


def declared_errors(endpoint: str, view: Callable[..., Any]) -> tuple[type[ServiceError], ...]:
    """Every error class the view's responses document, implied ones included, in order."""
    doc = route_doc(endpoint, view)
    implied = _AUTH_ERRORS if route_grants(view) else ()
    errors = (*(doc.errors if doc else ()), *implied, *_ALWAYS_ERRORS)
    return tuple(dict.fromkeys(errors))


def openapi_path(rule: Rule) -> str:
    """The rule's path in OpenAPI template syntax: ``/labs/<username>`` → ``/labs/{username}``."""
    return re.sub(r"<(?:[^<>:]*:)?([A-Za-z_][A-Za-z0-9_]*)>", r"{\1}", rule.rule)


def converter_schema(converter: BaseConverter) -> dict[str, Any]:
    """The OpenAPI schema of the values a Werkzeug URL converter accepts."""
    if isinstance(converter, UUIDConverter):
        return {"type": "string", "format": "uuid"}
    if isinstance(converter, AnyConverter):
        return {"type": "string", "enum": sorted(converter.items)}
    if isinstance(converter, IntegerConverter | FloatConverter):
        schema: dict[str, Any] = {
            "type": "integer" if isinstance(converter, IntegerConverter) else "number"
        }
        minimum = converter.min
        if minimum is None and not converter.signed:
            minimum = 0
        if minimum is not None:
            schema["minimum"] = minimum
        if converter.max is not None:
            schema["maximum"] = converter.max
        return schema
    if isinstance(converter, PathConverter):
        return {"type": "string", "description": "May contain '/'."}
    if isinstance(converter, UnicodeConverter):
        # ``[^/]{1,}`` by default, ``[^/]{n,m}`` with length arguments: never an alternation,
        # so anchoring it as is keeps its meaning.
        return {"type": "string", "pattern": f"^{converter.regex}$"}
    return {"type": "string"}


_RULE_ARGUMENT = re.compile(
    r"<(?:(?P<converter>[A-Za-z_]\w*)(?:\((?P<args>.*?)\))?:)?(?P<name>\w+)>"
)
"""One ``<converter(args):name>`` of a URL rule, as Werkzeug's rule syntax writes it."""


def rule_converters(rule: Rule) -> dict[str, BaseConverter]:
    """Each path argument's converter, built the way the rule itself built it, from the
    rule's text with Werkzeug's public ``Rule.get_converter`` and ``parse_converter_args``."""
    converters = {}
    for match in _RULE_ARGUMENT.finditer(rule.rule):
        args, kwargs = parse_converter_args(match["args"]) if match["args"] else ((), {})
        converters[match["name"]] = rule.get_converter(
            match["name"], match["converter"] or "default", args, kwargs
        )
    return converters


def _path_parameters(rule: Rule, doc: RouteDoc | None) -> list[dict[str, Any]]:
    converters = rule_converters(rule)
    described = {**_PARAMETER_DESCRIPTIONS, **(doc.params if doc else {})}
    parameters = []
    for name in re.findall(r"\{([^{}]+)\}", openapi_path(rule)):
        converter = converters.get(name)
        parameter: dict[str, Any] = {
            "name": name,
            "in": "path",
            "required": True,
            "schema": converter_schema(converter) if converter else {"type": "string"},
        }
        if name in described:
            parameter["description"] = described[name]
        parameters.append(parameter)
    return parameters


def _header_parameter(header: Header) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if header.pattern:
        schema["pattern"] = header.pattern
    return {
        "name": header.name,
        "in": "header",
        "required": header.required,
        "description": header.description,
        "schema": schema,
    }


def _docstring_parts(view: Callable[..., Any]) -> tuple[str, str]:
    """The docstring's first paragraph as the summary and the rest as the description."""
    text = inspect.getdoc(view) or ""
    head, _, rest = text.partition("\n\n")
    return " ".join(head.split()), rest.strip()


def describe_grants(grants: Sequence[Grant], rule: Rule) -> str:
    """Who may call the route, in words: the scope, and whether the path's user is the caller."""
    if not grants:
        return "No authentication."
    user = "`{username}`" if "username" in rule.arguments else "the path's user"
    ways = []
    for grant in grants:
        if grant.same_user:
            ways.append(f"scope `{grant.scope}`, and {user} must be the caller's own username")
        else:
            ways.append(f"scope `{grant.scope}`")
    return "Requires " + "; or ".join(ways) + "."


def _first_line(obj: object) -> str:
    return (inspect.getdoc(obj) or "").split("\n", 1)[0].strip()


def _error_text(error: type[ServiceError]) -> str:
    """What an error class means to a caller: its docstring, but not the base class's,
    which describes the hierarchy rather than the unexpected failure it stands for."""
    if error is ServiceError:
        return "An unexpected failure; the details are in the service's logs."
    return _first_line(error)


def _error_responses(errors: Sequence[type[ServiceError]]) -> dict[int, dict[str, Any]]:
    """One response per status, listing the codes of every error class with that status."""
    by_status: dict[int, list[type[ServiceError]]] = {}
    for error in errors:
        by_status.setdefault(error.status, []).append(error)
    responses = {}
    for status, classes in sorted(by_status.items()):
        responses[status] = {
            "description": " ".join(f"`{c.code}`: {_error_text(c)}" for c in classes),
            "content": {
                "application/json": {
                    "schema": ErrorSchema,
                    "examples": {
                        c.code: {
                            "summary": _error_text(c),
                            "value": {"code": c.code, "message": _error_text(c)},
                        }
                        for c in classes
                    },
                }
            },
        }
    return responses


def _response(status: int, value: SchemaLike | Body | None) -> dict[str, Any]:
    if value is None:
        return {"description": HTTPStatus(status).phrase}
    body = value if isinstance(value, Body) else Body(HTTPStatus(status).phrase, value)
    response: dict[str, Any] = {"description": body.description, **body.extensions}
    if body.schema is not None:
        media: dict[str, Any] = {"schema": body.schema}
        if body.example is not None:
            media["example"] = body.example
        response["content"] = {body.content_type: media}
    if body.headers:
        response["headers"] = {
            name: {"description": text, "schema": {"type": "string"}}
            for name, text in body.headers.items()
        }
    return response


def _operation(
    endpoint: str, view: Callable[..., Any], rule: Rule, operation_id: str
) -> dict[str, Any]:
    doc = route_doc(endpoint, view)
    grants = route_grants(view)
    summary, details = _docstring_parts(view)
    if doc and doc.summary:
        summary = doc.summary
    if doc and doc.description:
        details = doc.description
    access = describe_grants(grants, rule)
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": summary or endpoint,
        "description": "\n\n".join(part for part in (details, access) if part),
        "tags": [endpoint.split(".", 1)[0] if "." in endpoint else "app"],
        "parameters": [
            *_path_parameters(rule, doc),
            *(_header_parameter(h) for h in (doc.headers if doc else ())),
        ],
    }
    if grants:
        operation["security"] = [{SECURITY_SCHEME: []}]
        operation["x-required-grants"] = [
            {"scope": g.scope, "sameUser": g.same_user} for g in grants
        ]
    else:
        operation["security"] = []
    if doc and doc.request is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": doc.request}},
        }
    successes = dict(doc.responses) if doc and doc.responses else {200: None}
    responses = {status: _response(status, value) for status, value in successes.items()}
    for status, response in _error_responses(declared_errors(endpoint, view)).items():
        if status in responses:
            raise ValueError(f"{endpoint}: status {status} is declared both as a body and an error")
        responses[status] = response
    operation["responses"] = {str(status): responses[status] for status in sorted(responses)}
    return operation


def _tag_description(app: Flask, name: str) -> str:
    blueprint = app.blueprints.get(name)
    module = sys.modules.get(blueprint.import_name) if blueprint else None
    return _first_line(module) if module else ""


def _version() -> str:
    try:
        return importlib.metadata.version("lab-spawner")
    except importlib.metadata.PackageNotFoundError:
        return "unreleased"


class _NamingResolver:
    """apispec's default component names, remembering each name's schema class so the
    class docstring can describe the component (apispec itself ignores docstrings)."""

    def __init__(self) -> None:
        self.classes: dict[str, type[Schema]] = {ERROR_SCHEMA_NAME: ErrorSchema}

    def __call__(self, schema: type[Schema] | Schema) -> str:
        name = resolver(schema)  # type: ignore[arg-type]
        resolved = resolve_schema_cls(schema)
        if isinstance(resolved, type):
            self.classes.setdefault(name, resolved)
        return name


def _describe_components(document: dict[str, Any], classes: Mapping[str, type[Schema]]) -> None:
    schemas = document.get("components", {}).get("schemas", {})
    for name, body in schemas.items():
        # The class's own docstring only: an inherited one describes marshmallow's Schema.
        own = classes[name].__dict__.get("__doc__") if name in classes else None
        text = inspect.cleandoc(own) if own else None
        if text and "description" not in body:
            body["description"] = text.split("\n\n", 1)[0].replace("\n", " ")


def build_spec(app: Flask) -> dict[str, Any]:
    """Generate the OpenAPI document of every route ``app`` serves (``static`` excepted)."""
    naming = _NamingResolver()
    spec = APISpec(
        title="Lab spawner",
        version=_version(),
        openapi_version=OPENAPI_VERSION,
        plugins=[MarshmallowPlugin(schema_name_resolver=naming)],
        info={
            "description": (
                "Creates, tracks and deletes users' JupyterLab pods. Every error is a JSON "
                "body with a machine-readable `code` and a human `message` (schema "
                f"`{ERROR_SCHEMA_NAME}`)."
            )
        },
    )
    spec.components.schema(ERROR_SCHEMA_NAME, schema=ErrorSchema)
    spec.components.security_scheme(
        SECURITY_SCHEME,
        {
            "type": "http",
            "scheme": "bearer",
            "description": (
                "A Gafaelfawr token, verified by the service against Gafaelfawr's API. "
                f"Behind the ingress it may instead arrive in `{TOKEN_HEADER}`."
            ),
        },
    )
    rules = sorted(
        (r for r in app.url_map.iter_rules() if r.endpoint != "static"),
        key=lambda r: (openapi_path(r), r.endpoint),
    )
    endpoint_rules: dict[str, int] = {}
    for rule in rules:
        endpoint_rules[rule.endpoint] = endpoint_rules.get(rule.endpoint, 0) + 1
    seen: dict[str, int] = {}
    paths: dict[str, dict[str, Any]] = {}
    for rule in rules:
        view = app.view_functions[rule.endpoint]
        seen[rule.endpoint] = seen.get(rule.endpoint, 0) + 1
        operation_id = rule.endpoint
        if endpoint_rules[rule.endpoint] > 1:
            operation_id = f"{rule.endpoint}.{seen[rule.endpoint]}"
        methods = sorted((rule.methods or set()) - _SKIPPED_METHODS)
        operations = paths.setdefault(openapi_path(rule), {})
        for method in methods:
            suffix = f".{method.lower()}" if len(methods) > 1 else ""
            operations[method.lower()] = _operation(
                rule.endpoint, view, rule, operation_id + suffix
            )
    tags = sorted({op["tags"][0] for ops in paths.values() for op in ops.values()})
    for tag in tags:
        spec.tag({"name": tag, "description": _tag_description(app, tag)})
    for path, operations in paths.items():
        spec.path(path=path, operations=operations)
    document = spec.to_dict()
    _describe_components(document, naming.classes)
    return document


_build_lock = threading.Lock()


def get_spec(app: Flask) -> dict[str, Any]:
    """The app's document, built on first use and then reused for the life of the app.

    Built lazily rather than in ``create_app`` so routes registered after the factory
    (by tests, or by a later blueprint) are in it. Callers share the cached dict and must
    not change it.
    """
    cached = app.extensions.get("openapi")
    if cached is None:
        with _build_lock:
            cached = app.extensions.get("openapi")
            if cached is None:
                cached = build_spec(app)
                app.extensions["openapi"] = cached
    return cached


# A flat view of the document for the HTML page. ---------------------------------------------


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
        g["scope"] + (" (the path's user must be the caller)" if g["sameUser"] else "")
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
    path: str, method: str, op: Mapping[str, Any], components: Mapping[str, Any]
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
            for p in op.get("parameters", ())
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
        _operation_view(path, method, op, components)
        for path, items in spec.get("paths", {}).items()
        for method, op in items.items()
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

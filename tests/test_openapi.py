"""The OpenAPI document covers every route, parameter and error, and the docs page shows it.

These tests walk the app's own ``url_map`` rather than a list of expected paths, so a route
added anywhere without documentation, or a view that starts raising an error its
declaration does not mention, fails here instead of silently drifting from the document.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from flask import Blueprint, Flask, Response, jsonify
from marshmallow import Schema, fields, validate

from app.config import Config
from app.errors import (
    AuthenticationError,
    ConflictError,
    DependencyUnavailableError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RebuildingError,
    ServiceError,
)
from app.extensions import api_ext
from app.extensions.api import operations
from app.schemas.labs import LabStatusSchema, SpawnRequestSchema
from app.services.auth import ADMIN, OWNER
from app.storage.events import EventType
from app.web.api import (
    SECURITY_SCHEME,
    USERNAME_MAX_LENGTH,
    USERNAME_PATTERN,
    ApiBlueprint,
    declared_errors,
    header_parameter,
    raises,
    required_grants,
)
from blueprints.nublado import nublado_error_body
from blueprints.support.auth import requires

SKIPPED = {"HEAD", "OPTIONS"}


@pytest.fixture
def spec(app: Flask) -> dict[str, Any]:
    return api_ext.document(app)


def _rules(app: Flask) -> list[Any]:
    return [rule for rule in app.url_map.iter_rules() if rule.endpoint != "static"]


def _methods(rule: Any) -> list[str]:
    return sorted(set(rule.methods) - SKIPPED)


def _openapi_path(rule: Any) -> str:
    return re.sub(r"<(?:[^<>:]*:)?(\w+)>", r"{\1}", rule.rule)


def _operation(spec: Mapping[str, Any], rule: Any, method: str) -> dict[str, Any]:
    path = _openapi_path(rule)
    assert path in spec["paths"], f"{rule.rule} is not in the document"
    items = spec["paths"][path]
    assert method.lower() in items, f"{method} {rule.rule} is not in the document"
    operation: dict[str, Any] = items[method.lower()]
    return operation


def _parameters(spec: Mapping[str, Any], path: str, method: str) -> dict[tuple[str, str], Any]:
    """An operation's parameters by (location, name), those of its path included."""
    items = spec["paths"][path]
    merged = [*items.get("parameters", ()), *items[method].get("parameters", ())]
    return {(p["in"], p["name"]): p for p in merged}


def _resolve(spec: Mapping[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), f"external $ref {ref}"
    node: Any = spec
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, Mapping) and part in node, f"$ref {ref} does not resolve"
        node = node[part]
    return node


def _walk(node: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(node, Mapping):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _raised_errors(func: Callable[..., Any], seen: set[Any]) -> set[type[ServiceError]]:
    """``ServiceError`` classes raised in ``func``'s source or in the project functions it
    calls by name (services' methods are what the declarations are for)."""
    func = inspect.unwrap(func)
    if func in seen:
        return set()
    seen.add(func)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError):
        return set()
    namespace: dict[str, Any] = func.__globals__

    def lookup(node: ast.expr) -> Any:
        if isinstance(node, ast.Name):
            return namespace.get(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            # Only ``module.name``: touching other objects (Flask's proxies) has effects.
            owner = namespace.get(node.value.id)
            return getattr(owner, node.attr, None) if inspect.ismodule(owner) else None
        return None

    found: set[type[ServiceError]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = lookup(node.exc.func if isinstance(node.exc, ast.Call) else node.exc)
            if isinstance(target, type) and issubclass(target, ServiceError):
                found.add(target)
        elif isinstance(node, ast.Call):
            callee = lookup(node.func)
            module = getattr(callee, "__module__", "") or ""
            if inspect.isfunction(callee) and module.split(".")[0] in ("app", "blueprints"):
                found |= _raised_errors(callee, seen)
    return found


# The document's structure. -----------------------------------------------------------------


def test_document_is_openapi_3_and_every_ref_resolves(spec: dict[str, Any]) -> None:
    assert spec["openapi"].startswith("3.")
    assert spec["info"]["title"] and spec["info"]["version"]
    refs = [node["$ref"] for node in _walk(spec) if "$ref" in node]
    assert refs
    for ref in refs:
        _resolve(spec, ref)
    ids = [
        op["operationId"]
        for items in spec["paths"].values()
        for m, op in items.items()
        if m != "parameters"
    ]
    assert len(ids) == len(set(ids))


def test_every_schema_component_is_used_and_described(spec: dict[str, Any]) -> None:
    """Nothing in the document's schemas that no route returns or takes (flask-smorest's own
    pagination schema is dropped), and each carries its class's docstring."""
    schemas = spec["components"]["schemas"]
    referenced = {node["$ref"].rsplit("/", 1)[-1] for node in _walk(spec) if "$ref" in node}
    assert set(schemas) == referenced
    assert "PaginationMetadata" not in schemas
    assert schemas["LabStatus"]["description"]
    assert schemas["Error"]["required"] == ["code", "message"]


def test_every_path_template_parameter_is_declared(spec: dict[str, Any]) -> None:
    for path, items in spec["paths"].items():
        in_template = set(re.findall(r"\{([^{}]+)\}", path))
        for method in items:
            if method == "parameters":
                continue
            declared = {
                name: p
                for (where, name), p in _parameters(spec, path, method).items()
                if where == "path"
            }
            assert set(declared) == in_template, f"{method.upper()} {path}"
            assert all(p["required"] is True for p in declared.values())


def test_every_rule_and_method_is_in_the_document(app: Flask, spec: dict[str, Any]) -> None:
    rules = _rules(app)
    assert {r.rule for r in rules} >= {
        "/healthz",
        "/readyz",
        "/spawner/v1/labs",
        "/spawner/v1/labs/<username>",
        "/spawner/v1/labs/<username>/spawn",
        "/spawner/v1/labs/<username>/events",
        "/spawner/v1/user-status",
        "/spawner/v1/openapi.json",
        "/spawner/v1/docs",
    }
    assert len(operations(spec)) == sum(len(_methods(r)) for r in rules)
    for rule in rules:
        for method in _methods(rule):
            operation = _operation(spec, rule, method)
            assert operation["operationId"] == rule.endpoint
            assert operation["summary"]
            assert operation["tags"] == [rule.endpoint.split(".")[0]]
            declared = _parameters(spec, _openapi_path(rule), method.lower())
            assert {name for where, name in declared if where == "path"} == set(rule.arguments)


def test_every_operation_documents_its_success(app: Flask, spec: dict[str, Any]) -> None:
    """Each route says what it answers when all goes well, not only how it fails."""
    for rule in _rules(app):
        for method in _methods(rule):
            responses = _operation(spec, rule, method)["responses"]
            successes = [s for s in responses if 200 <= int(s) < 400]
            assert successes, f"{method} {rule.rule} documents no success response"


def test_username_parameter_is_the_one_the_service_checks(spec: dict[str, Any]) -> None:
    from blueprints import spawner

    parameter = _parameters(spec, "/spawner/v1/labs/{username}/spawn", "post")[("path", "username")]
    assert parameter["description"]
    assert parameter["schema"] == {
        "type": "string",
        "pattern": USERNAME_PATTERN,
        "maxLength": USERNAME_MAX_LENGTH,
    }
    assert spawner._USERNAME.pattern == USERNAME_PATTERN


# Security and errors. ----------------------------------------------------------------------


def test_authenticated_routes_document_security_and_auth_errors(
    app: Flask, spec: dict[str, Any]
) -> None:
    authenticated = 0
    for rule in _rules(app):
        grants = required_grants(app.view_functions[rule.endpoint])
        for method in _methods(rule):
            operation = _operation(spec, rule, method)
            if not grants:
                assert operation["security"] == []
                continue
            authenticated += 1
            assert operation["security"] == [{SECURITY_SCHEME: []}]
            assert operation["x-required-grants"] == [
                {
                    "scope": g.scope,
                    "sameUser": g.same_user,
                    **({"setting": g.setting} if g.setting else {}),
                }
                for g in grants
            ]
            for grant in grants:
                assert f"`{grant.scope}`" in operation["description"]
            owner_only = any(g.same_user for g in grants)
            assert ("must be the caller" in operation["description"]) == owner_only
            responses = operation["responses"]
            for status, code in (
                ("401", "not_authenticated"),
                ("403", "permission_denied"),
                ("503", "dependency_unavailable"),
            ):
                assert status in responses, f"{method} {rule.rule} lacks {status}"
                assert code in responses[status]["content"]["application/json"]["examples"]
    assert authenticated >= 6
    scheme = spec["components"]["securitySchemes"][SECURITY_SCHEME]
    assert scheme == {**scheme, "type": "http", "scheme": "bearer"}


def test_unauthenticated_routes(spec: dict[str, Any]) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/spawner/v1/openapi.json", "/spawner/v1/docs"):
        operation = spec["paths"][path]["get"]
        assert operation["security"] == []
        assert "401" not in operation["responses"]


def test_every_declared_error_is_documented(app: Flask, spec: dict[str, Any]) -> None:
    for rule in _rules(app):
        view = app.view_functions[rule.endpoint]
        errors = declared_errors(view)
        assert ServiceError in errors
        for method in _methods(rule):
            responses = _operation(spec, rule, method)["responses"]
            for error in errors:
                response = responses.get(str(error.status))
                assert response, f"{method} {rule.rule}: {error.__name__} is not documented"
                media = response["content"]["application/json"]
                assert error.code in media["examples"]
                example = media["examples"][error.code]["value"]
                if rule.endpoint.startswith("nublado."):
                    # The routes named after nublado's answer in its controller's body.
                    assert media["schema"] == {"$ref": "#/components/schemas/NubladoError"}
                    assert (
                        example["detail"][0]["type"]
                        == nublado_error_body(error, "")["detail"][0]["type"]
                    )
                else:
                    assert media["schema"] == {"$ref": "#/components/schemas/Error"}
                    assert example["code"] == error.code


def test_errors_raised_by_views_are_declared(app: Flask) -> None:
    """Guards against undocumented errors creeping in: what a view (or a helper it calls)
    raises must be among its declared errors."""
    for rule in _rules(app):
        view = app.view_functions[rule.endpoint]
        raised = _raised_errors(view, set())
        undeclared = raised - set(declared_errors(view))
        assert not undeclared, (
            f"{rule.endpoint} raises {sorted(e.__name__ for e in undeclared)} "
            "without declaring it with @raises(...)"
        )


def test_raised_error_scan_follows_helpers() -> None:
    from blueprints import spawner

    assert _raised_errors(spawner.spawn, set()) >= {InvalidRequestError, PermissionDeniedError}
    assert _raised_errors(spawner.lab_events, set()) >= {InvalidRequestError}


def test_every_error_response_has_the_error_shape(spec: dict[str, Any]) -> None:
    for path, items in spec["paths"].items():
        for method, operation in items.items():
            if method == "parameters":
                continue
            for status, response in operation["responses"].items():
                if int(status) < 400:
                    continue
                schema = response["content"]["application/json"]["schema"]
                body = _resolve(spec, schema["$ref"])
                nublado = operation["operationId"].startswith("nublado.")
                required = {"detail"} if nublado else {"code", "message"}
                assert required <= set(body["required"]), f"{method} {path} {status}"


def test_lab_routes_document_their_bodies_and_errors(spec: dict[str, Any]) -> None:
    paths = spec["paths"]
    spawn = paths["/spawner/v1/labs/{username}/spawn"]["post"]
    assert {"303", "409", "422"} <= set(spawn["responses"])
    assert "Location" in spawn["responses"]["303"]["headers"]
    assert spawn["requestBody"]["required"] is True
    assert spawn["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SpawnRequest"
    }
    assert "404" in paths["/spawner/v1/labs/{username}"]["get"]["responses"]
    delete = paths["/spawner/v1/labs/{username}"]["delete"]["responses"]
    assert {"202", "404"} <= set(delete)
    assert delete["202"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/DeleteAccepted"
    }
    status = paths["/spawner/v1/labs/{username}"]["get"]["responses"]["200"]
    assert status["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/LabStatus"
    }
    ready = paths["/readyz"]["get"]["responses"]["503"]["content"]["application/json"]
    assert _resolve(spec, ready["schema"]["$ref"])["required"] == ["checks", "code", "message"]
    assert ready["example"]["code"] == "not_ready"


def test_event_stream_is_documented(spec: dict[str, Any]) -> None:
    path = "/spawner/v1/labs/{username}/events"
    events = spec["paths"][path]["get"]
    ok = events["responses"]["200"]
    assert list(ok["content"]) == ["text/event-stream"]
    assert set(ok["x-event-types"]) == {kind.value for kind in EventType}
    for kind in EventType:
        assert f"`{kind.value}`" in ok["description"]
    header = _parameters(spec, path, "get")[("header", "Last-Event-ID")]
    assert header["required"] is False
    assert {"404", "422"} <= set(events["responses"])


# The blueprint. ----------------------------------------------------------------------------


class _CountQuerySchema(Schema):
    count = fields.Integer(
        load_default=1,
        validate=validate.Range(min=1, max=10),
        metadata={"description": "How many."},
    )


def _extra_blueprint() -> Blueprint:
    extra = ApiBlueprint("extra", __name__, url_prefix="/extra")

    @extra.post("/<int:number>/things/<uuid:thing>")
    @requires(OWNER, ADMIN)
    @extra.arguments(SpawnRequestSchema())
    @extra.response(201, LabStatusSchema)
    @extra.doc(
        parameters=[
            header_parameter("X-Trace", "A trace id.", pattern="^[a-f0-9]+$", required=True)
        ]
    )
    @raises(NotFoundError, ConflictError)
    def below_requires(body: dict[str, Any], number: int, thing: str) -> Response:
        """Decorated below ``requires``.

        More words for the description.
        """
        return jsonify({})

    @extra.get("/<any(a, b):which>/<path:rest>")
    @extra.response(200, {"type": "string"}, content_type="text/plain")
    @raises(ConflictError)
    @requires(ADMIN)
    def above_requires(which: str, rest: str) -> Response:
        """Echo <script>alert("x")</script> & friends."""
        return jsonify({})

    @extra.get("/counted")
    @extra.response(200, {"type": "object"})
    @extra.arguments(_CountQuerySchema(), location="query")
    def counted(query: dict[str, Any]) -> Response:
        """Takes query parameters, and no body."""
        return jsonify(query)

    @extra.route("/<float:ratio>", methods=["GET", "PUT"])
    def undeclared(ratio: float) -> Response:
        """Not decorated at all."""
        return jsonify({})

    return extra


@pytest.fixture
def extra_app(config: Config, make_app: Callable[[Config], Flask]) -> Flask:
    app = make_app(config)
    api_ext.register_blueprint(app, _extra_blueprint())
    return app


def test_decorators_work_on_either_side_of_requires(extra_app: Flask) -> None:
    spec = api_ext.document(extra_app)
    below = spec["paths"]["/extra/{number}/things/{thing}"]["post"]
    assert below["operationId"] == "extra.below_requires"
    assert below["summary"] == "Decorated below ``requires``."
    assert below["description"].startswith("More words for the description.")
    assert "`admin:notebook`" in below["description"]
    # A body route documents the body checks its blueprint makes (413, 422) by itself.
    assert set(below["responses"]) == {
        "201",
        "401",
        "403",
        "404",
        "409",
        "413",
        "422",
        "500",
        "503",
    }
    assert below["requestBody"]["required"] is True
    assert below["x-required-grants"][0] == {"scope": "exec:notebook", "sameUser": True}
    parameters = _parameters(spec, "/extra/{number}/things/{thing}", "post")
    assert parameters[("path", "number")]["schema"] == {"type": "integer", "minimum": 0}
    assert parameters[("path", "thing")]["schema"] == {"type": "string", "format": "uuid"}
    assert parameters[("header", "X-Trace")]["required"] is True

    above = spec["paths"]["/extra/{which}/{rest}"]["get"]
    assert above["responses"]["200"]["content"] == {"text/plain": {"schema": {"type": "string"}}}
    assert {"401", "403", "409", "503"} <= set(above["responses"])
    parameters = _parameters(spec, "/extra/{which}/{rest}", "get")
    assert parameters[("path", "which")]["schema"] == {"type": "string", "enum": ["a", "b"]}
    assert parameters[("path", "rest")]["schema"]["type"] == "string"


def test_query_parameters_are_declared_by_their_schema(extra_app: Flask) -> None:
    spec = api_ext.document(extra_app)
    counted = spec["paths"]["/extra/counted"]["get"]
    assert _parameters(spec, "/extra/counted", "get")[("query", "count")] == {
        "in": "query",
        "name": "count",
        "required": False,
        "description": "How many.",
        "schema": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
    }
    # Refused in the blueprint's error; not a body route, so no body and no 413.
    assert set(counted["responses"]) == {"200", "422", "500"}
    assert "requestBody" not in counted

    client = extra_app.test_client()
    assert client.get("/extra/counted").get_json() == {"count": 1}
    # A parameter the schema does not name is ignored, as HTTP clients expect.
    assert client.get("/extra/counted?count=3&page=2").get_json() == {"count": 3}
    # Whatever body comes with it is not the route's to bound.
    sent = client.get("/extra/counted?count=2", data="[[[", content_type="application/json")
    assert (sent.status_code, sent.get_json()) == (200, {"count": 2})
    for bad in ("0", "11", "many"):
        refused = client.get(f"/extra/counted?count={bad}")
        assert refused.status_code == 422, bad
        body = refused.get_json()
        assert (body["code"], body["field"]) == ("invalid_request", "count"), bad
        assert body["message"].startswith("count: "), bad


def test_an_undecorated_view_still_appears_with_each_method(extra_app: Flask) -> None:
    items = api_ext.document(extra_app)["paths"]["/extra/{ratio}"]
    assert {"get", "put"} <= set(items)
    assert items["get"]["operationId"] == items["put"]["operationId"] == "extra.undeclared"
    assert items["get"]["security"] == []
    assert set(items["get"]["responses"]) == {"500"}


def test_declared_errors_include_what_requires_implies(app: Flask) -> None:
    view = app.view_functions["prepull.list_images"]
    assert set(declared_errors(view)) == {
        AuthenticationError,
        PermissionDeniedError,
        DependencyUnavailableError,
        ServiceError,
    }
    assert declared_errors(app.view_functions["health.healthz"]) == (ServiceError,)
    listing = declared_errors(app.view_functions["spawner.list_labs"])
    assert listing[0] is RebuildingError and listing[-1] is ServiceError


# Serving. ----------------------------------------------------------------------------------


def test_openapi_json_is_served_without_auth_and_built_once(app: Flask) -> None:
    client = app.test_client()
    first = client.get("/spawner/v1/openapi.json")
    assert first.status_code == 200
    assert first.mimetype == "application/json"
    assert client.get("/spawner/v1/docs").status_code == 200
    assert client.get("/spawner/v1/openapi.json").get_json() == first.get_json()
    assert first.get_json() == api_ext.document(app)
    assert api_ext.document(app) is api_ext.document(app)


def test_apps_side_by_side_have_their_own_documents(
    config: Config, make_app: Callable[[Config], Flask]
) -> None:
    plain, extended = make_app(config), make_app(config)
    api_ext.register_blueprint(extended, _extra_blueprint())
    assert "/extra/{ratio}" in api_ext.document(extended)["paths"]
    assert "/extra/{ratio}" not in api_ext.document(plain)["paths"]


def test_docs_page_shows_every_operation(app: Flask, spec: dict[str, Any]) -> None:
    response = app.test_client().get("/spawner/v1/docs")
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    html = response.get_data(as_text=True)
    for path, operation in (
        (p, op)
        for p, items in spec["paths"].items()
        for m, op in items.items()
        if m != "parameters"
    ):
        assert path in html
        assert f'id="{operation["operationId"]}"' in html
    for text in (
        "admin:notebook",
        "exec:notebook",
        "LabStatus",
        "Last-Event-ID",
        "progress",
        "username (path)",
    ):
        assert text in html
    assert '<a href="#schema-SpawnRequest">' in html and 'id="schema-SpawnRequest"' in html
    assert "Requires scope <code>admin:notebook</code>" in html  # `code` spans rendered
    # Self-contained: nothing to fetch and nothing to run.
    assert "<script" not in html.lower()
    assert "src=" not in html and "<link" not in html
    assert "http://" not in html and "https://" not in html


def test_docs_page_escapes_text(extra_app: Flask) -> None:
    html = extra_app.test_client().get("/spawner/v1/docs").get_data(as_text=True)
    assert "<script" not in html
    assert "&lt;script&gt;alert(" in html
    assert "&amp; friends" in html

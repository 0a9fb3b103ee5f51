"""The API's OpenAPI document, kept by flask-smorest from the blueprints registered with it.

One ``Api`` per app (flask-smorest's object holds its app and spec, so apps built side by
side in tests each get their own). The document is generated when the first caller asks
for it and reused for the life of the app: blueprints registered after the factory (by
tests, or a later area) are in it as long as they come before that first read.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import threading
from collections.abc import Iterator, Mapping
from typing import Any, cast

from apispec.ext.marshmallow import MarshmallowPlugin, resolver
from apispec.ext.marshmallow.common import resolve_schema_cls
from flask import Flask, current_app
from flask_smorest import Api, Blueprint
from marshmallow import Schema

from app.schemas.errors import ERROR_SCHEMA_NAME, ErrorSchema
from app.services.auth import SECURITY_SCHEME, TOKEN_HEADER

TITLE = "Lab spawner"
OPENAPI_VERSION = "3.0.3"


class SpawnerApi(Api):
    """flask-smorest's ``Api`` with this service's error body and no catch-all "default"
    response: every route lists the statuses it can give, each with its codes."""

    ERROR_SCHEMA = ErrorSchema
    DEFAULT_ERROR_RESPONSE_NAME = None


class SchemaNames:
    """apispec's default component names, remembering each name's schema class so the
    class docstring can describe the component (apispec itself ignores docstrings)."""

    def __init__(self) -> None:
        self.classes: dict[str, type[Schema]] = {ERROR_SCHEMA_NAME: ErrorSchema}

    def __call__(self, schema: type[Schema] | Schema) -> str:
        name: str = resolver(schema)  # type: ignore[arg-type]
        resolved = resolve_schema_cls(schema)
        if isinstance(resolved, type):
            self.classes.setdefault(name, resolved)
        return name

    def describe(self, document: dict[str, Any]) -> None:
        """Give each schema component its class's own docstring's first paragraph."""
        schemas = document.get("components", {}).get("schemas", {})
        for name, body in schemas.items():
            # The class's own docstring only: an inherited one describes marshmallow's Schema.
            own = self.classes[name].__dict__.get("__doc__") if name in self.classes else None
            text = inspect.cleandoc(own) if own else None
            if text and "description" not in body:
                body["description"] = text.split("\n\n", 1)[0].replace("\n", " ")


def _version() -> str:
    try:
        return importlib.metadata.version("lab-spawner")
    except importlib.metadata.PackageNotFoundError:
        return "unreleased"


class ApiExtension:
    """Flask extension holding the app's flask-smorest ``Api`` and its generated document."""

    def init_app(self, app: Flask) -> Api:
        app.config.update(
            API_TITLE=TITLE,
            API_VERSION=_version(),
            OPENAPI_VERSION=OPENAPI_VERSION,
            API_SPEC_OPTIONS={
                "info": {
                    "description": (
                        "Creates, tracks and deletes users' JupyterLab pods. Every error is a "
                        "JSON body with a machine-readable `code` and a human `message` "
                        f"(schema `{ERROR_SCHEMA_NAME}`)."
                    )
                }
            },
        )
        # No OPENAPI_URL_PREFIX: the document and its page are served by the ``docs``
        # blueprint, itself documented, rather than by flask-smorest's own routes.
        names = SchemaNames()
        api = SpawnerApi(
            app, spec_kwargs={"marshmallow_plugin": MarshmallowPlugin(schema_name_resolver=names)}
        )
        api.spec.components.security_scheme(
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
        app.extensions["api"] = _ApiState(api, names)
        return api

    def register_blueprint(self, app: Flask, blueprint: Blueprint) -> None:
        """Route ``blueprint`` in ``app`` and add its routes to the document."""
        _state(app).api.register_blueprint(blueprint)

    def document(self, app: Flask | None = None) -> dict[str, Any]:
        """The app's OpenAPI document, generated on first use. Callers share the dict and
        must not change it."""
        return _state(app or current_app).document()


class _ApiState:
    def __init__(self, api: Api, names: SchemaNames) -> None:
        self.api = api
        self.names = names
        self._document: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def document(self) -> dict[str, Any]:
        if self._document is None:
            with self._lock:
                if self._document is None:
                    document = cast(dict[str, Any], self.api.spec.to_dict())
                    drop_unreferenced_schemas(document)
                    self.names.describe(document)
                    self._document = document
        return self._document


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_SCHEMA_REF):
            yield ref[len(_SCHEMA_REF) :]
        for value in node.values():
            yield from _references(value)
    elif isinstance(node, list):
        for value in node:
            yield from _references(value)


_SCHEMA_REF = "#/components/schemas/"


def drop_unreferenced_schemas(document: dict[str, Any]) -> None:
    """Remove schema components no operation uses, directly or through another schema:
    flask-smorest registers some of its own (pagination) whether or not a route needs them."""
    schemas = document.get("components", {}).get("schemas", {})
    used: set[str] = set()
    pending = list(_references(document.get("paths", {})))
    while pending:
        name = pending.pop()
        if name not in used and name in schemas:
            used.add(name)
            pending.extend(_references(schemas[name]))
    for name in set(schemas) - used:
        del schemas[name]


def _state(app: Flask) -> _ApiState:
    state = app.extensions["api"]
    assert isinstance(state, _ApiState)
    return state


def operations(document: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Every operation of the document by its ``operationId``."""
    return {
        str(op["operationId"]): op
        for items in document.get("paths", {}).values()
        for method, op in items.items()
        if method != "parameters"
    }

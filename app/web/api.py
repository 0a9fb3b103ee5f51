"""Blueprints that document themselves: flask-smorest's, plus what this service adds.

flask-smorest generates the OpenAPI document from the blueprints: paths and path parameters
from the URL rules, summaries from docstrings, bodies from ``@blueprint.response``. Two
things it cannot know are added here, at the moment a route is registered:

- **Who may call it.** ``requires`` records its grants on the view; the route gets the
  bearer security requirement, an ``x-required-grants`` list for tools, a sentence saying
  who may call it, and the 401, 403 and 503 responses ``requires`` itself can give.
- **How it fails.** Errors are declared as the ``ServiceError`` classes a view can raise
  (``@raises``), not as status codes, so each documented error response carries the
  class's machine-readable ``code`` and the one ``Error`` body the error handler renders.
  Every route also gets 500, from the catch-all handler, so no declaration has to remember it.

It also keeps one promise for every route rather than leaving it to each view: a route that
takes a body (flask-smorest's ``@blueprint.arguments``, which loads it with the route's schema
and hands it to the view) has it parsed and bounded (``bodies.json_object``) before anything
else of the request is looked at, and refused, whatever is wrong with it, in the blueprint's
error naming the field (``bodies.BodyParser``). Query parameters are declared the same way
(``location="query"``), their schema documenting them, and refused in the same error.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from flask import Response, jsonify, request
from flask_smorest import Blueprint

from app.errors import (
    AuthenticationError,
    BodyTooLargeError,
    DependencyUnavailableError,
    InvalidRequestError,
    PermissionDeniedError,
    ServiceError,
)
from app.schemas.errors import ErrorSchema
from app.services.auth import SECURITY_SCHEME, Grant
from app.web.bodies import BodyParser, json_object
from app.web.errors import ErrorBody, service_error_body, service_error_headers

F = TypeVar("F", bound=Callable[..., Any])

ERRORS_ATTRIBUTE = "service_errors"
"""Where ``@raises`` leaves its error classes on the view (``functools.wraps`` carries it)."""

AUTH_ERRORS: tuple[type[ServiceError], ...] = (
    AuthenticationError,
    PermissionDeniedError,
    DependencyUnavailableError,
)
"""What ``requires`` itself can raise: no or bad token, wrong scope or user, Gafaelfawr down."""

ALWAYS_ERRORS: tuple[type[ServiceError], ...] = (ServiceError,)
"""The catch-all handler turns any unexpected failure into a 500 ``internal_error``."""

USERNAME_PATTERN = r"^[a-z0-9](?:[a-z0-9]|-[a-z0-9])*$"
USERNAME_MAX_LENGTH = 55
"""A Gafaelfawr username as a lab's namespace and pod names can hold it."""

PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "username": {
        "description": "The lab's user: a Gafaelfawr username (lowercase letters, digits and '-').",
        "schema": {"type": "string", "pattern": USERNAME_PATTERN, "maxLength": USERNAME_MAX_LENGTH},
    },
}
"""Path parameters that mean the same thing on every route, documented once here."""


def raises(*errors: type[ServiceError]) -> Callable[[F], F]:
    """Declare the ``ServiceError`` classes a view (or the services it calls) can raise,
    beyond the ones ``requires`` implies. The view is returned unchanged."""

    def decorate(view: F) -> F:
        declared = getattr(view, ERRORS_ATTRIBUTE, ())
        setattr(view, ERRORS_ATTRIBUTE, tuple(dict.fromkeys((*declared, *errors))))
        return view

    return decorate


def required_grants(view: Callable[..., Any]) -> tuple[Grant, ...]:
    """The grants ``requires`` recorded on the view; empty for an unauthenticated route."""
    return tuple(getattr(view, "required_grants", ()))


def declared_errors(view: Callable[..., Any]) -> tuple[type[ServiceError], ...]:
    """Every error class the view's document lists, implied ones included, in order."""
    implied = AUTH_ERRORS if required_grants(view) else ()
    errors = (*getattr(view, ERRORS_ATTRIBUTE, ()), *implied, *ALWAYS_ERRORS)
    return tuple(dict.fromkeys(errors))


def header_parameter(
    name: str, description: str, *, pattern: str | None = None, required: bool = False
) -> dict[str, Any]:
    """A request header a route reads, as an OpenAPI parameter for ``@blueprint.doc``."""
    schema: dict[str, Any] = {"type": "string"}
    if pattern:
        schema["pattern"] = pattern
    return {
        "name": name,
        "in": "header",
        "required": required,
        "description": description,
        "schema": schema,
    }


def describe_grants(grants: Sequence[Grant], rule: str) -> str:
    """Who may call the route, in words: the scope, and whether the path's user is the caller."""
    if not grants:
        return "No authentication."
    user = "`{username}`" if "<username>" in rule else "the path's user"
    ways = []
    for grant in grants:
        way = f"scope `{grant.scope}`"
        if grant.setting:
            way += f" (the default of `{grant.setting}`, which a deployment may change)"
        if grant.same_user:
            way += f", and {user} must be the caller's own username"
        ways.append(way)
    return "Requires " + "; or ".join(ways) + "."


def grant_document(grant: Grant) -> dict[str, Any]:
    """A grant as ``x-required-grants`` lists it; ``setting`` names the configuration key
    that replaces a configurable grant's (default) scope."""
    entry: dict[str, Any] = {"scope": grant.scope, "sameUser": grant.same_user}
    if grant.setting:
        entry["setting"] = grant.setting
    return entry


def _error_text(error: type[ServiceError]) -> str:
    """What an error class means to a caller: its docstring, but not the base class's,
    which describes the hierarchy rather than the unexpected failure it stands for."""
    if error is ServiceError:
        return "An unexpected failure; the details are in the service's logs."
    return " ".join((inspect.getdoc(error) or "").split("\n\n", 1)[0].split())


def error_responses(
    errors: Sequence[type[ServiceError]],
    schema: Any = ErrorSchema,
    body: ErrorBody = service_error_body,
) -> dict[int, dict[str, Any]]:
    """One response per status, listing the codes of every error class with that status,
    their bodies as ``body`` words them and described by ``schema``.

    Keyed by number, as flask-smorest keys the responses it documents, so a manual entry
    merges with the decorator's one for the same status rather than replacing it."""
    by_status: dict[int, list[type[ServiceError]]] = {}
    for error in errors:
        by_status.setdefault(error.status, []).append(error)
    return {
        status: {
            "description": " ".join(f"`{c.code}`: {_error_text(c)}" for c in classes),
            "content": {
                "application/json": {
                    "schema": schema,
                    "examples": {
                        c.code: {"summary": _error_text(c), "value": body(c, _error_text(c), None)}
                        for c in classes
                    },
                }
            },
        }
        for status, classes in sorted(by_status.items())
    }


def _docstring_parts(view: Callable[..., Any]) -> tuple[str, str]:
    """The docstring's first paragraph, on one line, as the summary; the rest as details."""
    head, _, rest = (inspect.getdoc(view) or "").partition("\n\n")
    return " ".join(head.split()), rest.strip()


class ApiBlueprint(Blueprint):
    """A flask-smorest blueprint whose routes also document their access and their errors.

    ``description`` defaults to the first line of the module that defines the blueprint,
    which names its area in the document's tags. A blueprint whose callers expect errors in
    another shape (the routes named after nublado's) gives ``error_body`` and its
    ``error_schema``: its errors are then answered and documented that way; every other
    blueprint's get the service's one shape from the application's handlers. A blueprint
    whose design refuses unusable bodies with another error than 422 ``invalid_request``
    (the seed's scaler: 400 ``bad_request``) names it as ``body_error``.

    A body is declared with ``@blueprint.arguments(Schema())`` right above the view, below
    ``requires`` and ``audited``: its fields are loaded once the caller may act (and an
    administrator's refused action is audited), while its shape was bounded before anything
    else, for every caller alike. Query parameters are declared in the same place with
    ``@blueprint.arguments(QuerySchema(), location="query")``.
    """

    def __init__(
        self,
        name: str,
        import_name: str,
        *,
        error_body: ErrorBody | None = None,
        error_schema: Any = ErrorSchema,
        body_error: type[ServiceError] = InvalidRequestError,
        **kwargs: Any,
    ) -> None:
        if "description" not in kwargs:
            module = sys.modules.get(import_name)
            kwargs["description"] = (inspect.getdoc(module) or "").split("\n", 1)[0]
        super().__init__(name, import_name, **kwargs)
        self._error_body = error_body or service_error_body
        self._error_schema = error_schema
        self._body_error = body_error
        self.ARGUMENTS_PARSER = BodyParser(body_error)
        self._body_views: set[Callable[..., Any]] = set()
        self._body_endpoints: set[str] = set()
        if error_body is not None:
            self.register_error_handler(ServiceError, self._error_response)
        self.before_request(self._bound_body)

    def _bound_body(self) -> None:
        """Parse and bound the body of a route that takes one, before anything else of the
        request is looked at: a body nested thousands deep, or holding a NUL, is refused
        here in the blueprint's error, whatever its view would have done with it."""
        if (request.endpoint or "").rpartition(".")[2] in self._body_endpoints:
            json_object(request, error=self._body_error)

    def _error_response(self, error: ServiceError) -> Response:
        response = jsonify(self._error_body(type(error), error.message, error.field))
        response.status_code = error.status
        response.headers.extend(service_error_headers(error))
        return response

    def route(
        self,
        rule: str,
        *,
        parameters: list[Any] | None = None,
        tags: list[str] | None = None,
        **options: Any,
    ) -> Callable[[F], F]:
        register = super().route(
            rule, parameters=self._path_parameters(rule, parameters), tags=tags, **options
        )

        def decorate(view: F) -> F:
            register(self._documented(rule, options.get("endpoint") or view.__name__, view))
            return view

        return decorate

    def arguments(self, schema: Any, *, location: str = "json", **kwargs: Any) -> Callable[[F], F]:
        """flask-smorest's ``arguments``: the view receives the JSON body (``location``
        ``"json"``) or the query parameters (``"query"``) loaded by ``schema``, and the
        document shows the blueprint's refusal of them, not webargs' 422. Only a body makes
        the route a body route: bounded before anything else, and documented with 413."""
        kwargs.setdefault("error_status_code", self._body_error.status)
        load = super().arguments(schema, location=location, **kwargs)
        body = location == "json"
        errors = (self._body_error, BodyTooLargeError) if body else (self._body_error,)

        def decorate(view: F) -> F:
            loading: F = load(raises(*errors)(view))
            if body:
                self._body_views.add(loading)
            return loading

        return decorate

    def text_response(
        self, content_type: str, *, description: str, example: str | None = None
    ) -> Callable[[F], F]:
        """Document a 200 answered as text of ``content_type`` (an HTML page or fragment,
        Prometheus' format), not JSON."""
        extra = {"example": example} if example is not None else {}
        return self.response(
            200, {"type": "string"}, content_type=content_type, description=description, **extra
        )

    @staticmethod
    def _path_parameters(rule: str, given: list[Any] | None) -> list[Any]:
        named = {p["name"] for p in given or () if isinstance(p, dict)}
        shared = [
            {"in": "path", "name": name, "required": True, **PATH_PARAMETERS[name]}
            for name in re.findall(r"<(?:[^<>:]*:)?(\w+)>", rule)
            if name in PATH_PARAMETERS and name not in named
        ]
        return [*(given or ()), *shared]

    def _documented(self, rule: str, endpoint: str, view: F) -> F:
        if inspect.unwrap(view, stop=self._body_views.__contains__) in self._body_views:
            self._body_endpoints.add(endpoint)
        grants = required_grants(view)
        summary, details = _docstring_parts(view)
        doc: dict[str, Any] = {
            "operationId": f"{self.name}.{endpoint}",
            "summary": summary or endpoint,
            "description": "\n\n".join(
                part for part in (details, describe_grants(grants, rule)) if part
            ),
            "security": [{SECURITY_SCHEME: []}] if grants else [],
            "responses": error_responses(
                declared_errors(view), self._error_schema, self._error_body
            ),
        }
        if grants:
            doc["x-required-grants"] = [grant_document(g) for g in grants]
        documented: F = self.doc(**doc)(view)
        return documented

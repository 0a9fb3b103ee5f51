"""Parse request bodies with marshmallow and report the first problem by field.

Bodies and query parameters reach a view through flask-smorest's ``@blueprint.arguments``,
whose webargs parser (``BodyParser``) reads them and words their problems as the service's
errors. Before a schema sees a body, its shape is bounded: its size by Flask's
``MAX_CONTENT_LENGTH`` (413 ``body_too_large``), its nesting here (the spawn body is two
levels deep; a body of a thousand nested objects would otherwise exhaust the parser's
recursion), and no string in it may hold a NUL byte, which no Kubernetes object, file name or
environment value can carry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NoReturn

from flask import Request, current_app, g
from marshmallow import Schema, ValidationError
from webargs.flaskparser import FlaskParser
from werkzeug.exceptions import RequestEntityTooLarge

from app.errors import BodyTooLargeError, InvalidRequestError, ServiceError

MAX_DEPTH = 8
"""Levels of objects and arrays a body may nest; the service's bodies use two or three."""

_PARSED_BODY = "parsed_json_body"
"""Where ``json_object`` keeps the request's body once it has parsed and bounded it."""


def _first_problem(messages: Any, prefix: str = "") -> tuple[str, str]:
    if isinstance(messages, Mapping):
        key = sorted(messages, key=str)[0]
        path = f"{prefix}.{key}" if prefix else str(key)
        return _first_problem(messages[key], path)
    if isinstance(messages, list) and messages:
        return _first_problem(messages[0], prefix)
    return prefix, str(messages)


def check_structure(
    data: Any,
    max_depth: int = MAX_DEPTH,
    *,
    error: type[ServiceError] = InvalidRequestError,
) -> None:
    """``error`` (422 by default) naming the place where ``data`` nests deeper than
    ``max_depth`` or holds a NUL.

    Walked with an explicit stack, so the check itself never recurses.
    """
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                raise error(f"{path}: NUL bytes are not allowed", field=path)
            continue
        if isinstance(value, dict):
            items: list[tuple[str, Any]] = list(value.items())
        elif isinstance(value, list):
            items = [(str(i), v) for i, v in enumerate(value)]
        else:
            continue
        if depth >= max_depth:
            problem = f"the request body nests deeper than {max_depth} levels"
            raise error(problem, field=path or None)
        for key, item in items:
            child = f"{path}.{key}" if path else key
            if "\x00" in key:
                raise error(f"{child}: NUL bytes are not allowed", field=child)
            stack.append((item, child, depth + 1))


def too_large() -> BodyTooLargeError:
    """413 naming the application's body limit (Flask's ``MAX_CONTENT_LENGTH``)."""
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    return BodyTooLargeError(f"the request body is larger than {limit} bytes")


def json_object(req: Request, *, error: type[ServiceError] = InvalidRequestError) -> dict[str, Any]:
    """The request's body as a JSON object of bounded shape; ``error`` (422 by default, 400
    for the APIs whose design says so) naming the problem otherwise.

    Parsed here rather than by ``request.get_json``: a body nested thousands deep exhausts
    the parser's recursion, which Flask would let through as a 500. Parsed once a request:
    the blueprint bounds a body route's body before anything else, and its schema loads it
    later from here.
    """
    cached: dict[str, Any] | None = g.get(_PARSED_BODY)
    if cached is not None:
        return cached
    if not req.is_json:
        raise error("the request body must be a JSON object")
    try:
        raw = req.get_data(cache=False)
    except RequestEntityTooLarge:
        raise too_large() from None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise error("the request body must be a JSON object") from None
    if not isinstance(data, dict):
        raise error("the request body must be a JSON object")
    check_structure(data, error=error)
    setattr(g, _PARSED_BODY, data)
    return data


class BodyParser(FlaskParser):
    """webargs' parser behind flask-smorest's ``@blueprint.arguments``, with this service's
    bounds and answers: a body is read by ``json_object``, and a body or query its schema
    refuses is ``error`` (the blueprint's: 422 ``invalid_request``, or the scaler's 400
    ``bad_request``) naming the first field at fault, as ``field`` and at the head of the
    message. Query parameters no schema names are ignored (webargs' default for queries)."""

    def __init__(self, error: type[ServiceError] = InvalidRequestError) -> None:
        super().__init__()
        self.error = error

    def load_json(self, req: Request, schema: Schema) -> dict[str, Any]:
        return json_object(req, error=self.error)

    def handle_error(
        self,
        error: ValidationError,
        req: Request,
        schema: Schema,
        *,
        error_status_code: int | None,
        error_headers: Mapping[str, str] | None,
    ) -> NoReturn:
        # webargs files the schema's messages under their location: {"json": {...}} or
        # {"query": {...}}.
        (messages,) = error.normalized_messages().values()
        field, message = _first_problem(messages)
        raise self.error(f"{field}: {message}", field=field) from None

"""Parse request bodies with marshmallow and report the first problem by field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import request
from marshmallow import Schema, ValidationError

from app.errors import InvalidRequestError


def _first_problem(messages: Any, prefix: str = "") -> tuple[str, str]:
    if isinstance(messages, Mapping):
        key = sorted(messages, key=str)[0]
        path = f"{prefix}.{key}" if prefix else str(key)
        return _first_problem(messages[key], path)
    if isinstance(messages, list) and messages:
        return _first_problem(messages[0], prefix)
    return prefix, str(messages)


def load_body(schema: Schema) -> dict[str, Any]:
    """The request's JSON body validated by ``schema``; a 422 naming the field otherwise."""
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    try:
        result: dict[str, Any] = schema.load(data)
    except ValidationError as exc:
        field, message = _first_problem(exc.messages)
        raise InvalidRequestError(f"{field}: {message}", field=field) from None
    return result

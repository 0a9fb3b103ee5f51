"""Turn every failure into the one JSON error shape, with no tokens in it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import redis
from flask import Flask, Response, jsonify
from redis.exceptions import MasterDownError
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from app.errors import AuthenticationError, ServiceError
from app.web.bodies import too_large

logger = logging.getLogger(__name__)


ErrorBody = Callable[[type[ServiceError], str, "str | None"], dict[str, Any]]
"""How a blueprint words an error: its body from the class, the message and the field."""


def service_error_body(
    error: type[ServiceError], message: str, field: str | None = None
) -> dict[str, Any]:
    """The service's one error body (``ErrorSchema``)."""
    body = {"code": error.code, "message": message}
    if field is not None:
        body["field"] = field
    return body


def error_response(status: int, code: str, message: str, field: str | None = None) -> Response:
    body: dict[str, str] = {"code": code, "message": message}
    if field is not None:
        body["field"] = field
    response = jsonify(body)
    response.status_code = status
    return response


def service_error_headers(exc: ServiceError) -> dict[str, str]:
    """The headers an error's answer carries, whatever shape its body has: how to
    authenticate, and when to try again."""
    headers = {}
    if isinstance(exc, AuthenticationError):
        headers["WWW-Authenticate"] = 'Bearer realm="spawner"'
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return headers


def _service_error(exc: ServiceError) -> Response:
    response = error_response(exc.status, exc.code, exc.message, exc.field)
    response.headers.extend(service_error_headers(exc))
    return response


def _http_error(exc: HTTPException) -> Response:
    code = (exc.name or "error").lower().replace(" ", "_")
    response = error_response(exc.code or 500, code, exc.description or exc.name)
    for name, value in exc.get_headers():
        if name.lower() not in ("content-type", "content-length"):
            response.headers[name] = value
    return response


def _body_too_large(exc: RequestEntityTooLarge) -> Response:
    return _service_error(too_large())


def _redis_down(exc: redis.RedisError) -> Response:
    logger.warning("Redis unavailable: %s", type(exc).__name__)
    return error_response(
        503, "dependency_unavailable", "the service's state store (Redis) is unavailable"
    )


def _redis_answered(exc: redis.ResponseError) -> Response:
    """Errors a Redis server answers while it cannot be our primary are an outage, like a
    connection refused, not a bug of ours: a replica or a demoted primary (``READONLY``), a
    primary that lost its replicas (``NOREPLICAS``), a replica cut off from its primary
    (``MASTERDOWN``)."""
    unavailable = isinstance(exc, redis.ReadOnlyError | MasterDownError)
    if unavailable or str(exc).startswith("NOREPLICAS"):
        return _redis_down(exc)
    return _unexpected(exc)


def _unexpected(exc: Exception) -> Response:
    logger.exception("unhandled error")
    return error_response(500, "internal_error", "internal error; see the service logs")


def register_error_handlers(app: Flask) -> None:
    app.register_error_handler(ServiceError, _service_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(RequestEntityTooLarge, _body_too_large)
    app.register_error_handler(redis.RedisError, _redis_down)
    # Redis answered, with an error: a bug of ours, not an outage, unless it says that
    # server cannot take our writes now (during a failover).
    app.register_error_handler(redis.ResponseError, _redis_answered)
    app.register_error_handler(Exception, _unexpected)

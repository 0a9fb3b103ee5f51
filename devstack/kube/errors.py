"""Kubernetes ``Status`` errors.

Every failure the emulator reports, whether from the store, validation or routing, is an
:class:`ApiError` so the HTTP layer can turn it into the ``Status`` object a real API server
sends and the real client turns into ``ApiException`` with the same code and reason.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error that becomes a ``kind: Status`` response with ``status: Failure``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        """The ``Status`` object, shaped as kube-apiserver shapes it."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(kind: str, name: str | None, group: str = "") -> dict[str, Any]:
    details: dict[str, Any] = {"kind": kind}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def _qualified(kind: str, group: str) -> str:
    return f"{kind}.{group}" if group else kind


def not_found(kind: str, name: str, group: str = "") -> ApiError:
    """404 for an object that does not exist; ``kind`` is the resource plural, as upstream."""
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(kind, group)} "{name}" not found',
        details=_details(kind, name, group),
    )


def already_exists(kind: str, name: str, group: str = "") -> ApiError:
    """409 for a create whose name is taken."""
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(kind, group)} "{name}" already exists',
        details=_details(kind, name, group),
    )


def conflict(kind: str, name: str, group: str = "") -> ApiError:
    """409 for a write based on a stale ``resourceVersion``."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(kind, group)} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again",
        details=_details(kind, name, group),
    )


def invalid(kind: str, name: str, causes: list[dict[str, str]], group: str = "") -> ApiError:
    """422 with one ``details.causes`` entry per offending field."""
    summary = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    details = _details(kind, name, group)
    details["causes"] = causes
    return ApiError(
        422,
        "Invalid",
        f'{_qualified(kind, group)} "{name}" is invalid: {summary}',
        details=details,
    )


def forbidden(
    kind: str, name: str, why: str, group: str = "", causes: list[dict[str, str]] | None = None
) -> ApiError:
    """403, as admission plugins (e.g. namespace lifecycle) report it; ``causes`` go into
    ``details.causes`` as the plugin gives them."""
    target = f'{_qualified(kind, group)} "{name}"' if name else _qualified(kind, group)
    details = _details(kind, name, group)
    if causes:
        details["causes"] = causes
    return ApiError(403, "Forbidden", f"{target} is forbidden: {why}", details=details)


def bad_request(message: str) -> ApiError:
    """400 for a body or query the server cannot parse."""
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str) -> ApiError:
    """405 for a verb the resource does not support."""
    return ApiError(405, "MethodNotAllowed", message)


def gone(message: str) -> ApiError:
    """410 for a watch or list from a resourceVersion older than the retained history."""
    return ApiError(410, "Expired", message)


def internal_error(message: str) -> ApiError:
    """500, used by injected faults."""
    return ApiError(500, "InternalError", message)


def unsupported_media_type(content_type: str) -> ApiError:
    """415 for a patch with a content type the server does not know."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format: {content_type}",
    )

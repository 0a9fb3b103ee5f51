"""Exceptions that carry the service's error code and message.

The service answers every error as ``{"code", "message", "field"}``. Callers handle each kind
differently (re-authenticate, ask an administrator, create instead of read, back off, fix the
request), so each kind is a class of its own; all derive from :class:`LabSpawnerError`.
"""

from __future__ import annotations

from typing import Any


class LabSpawnerError(Exception):
    """Any error the service answered, or a failure to reach it."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "error",
        status: int | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.field = field

    def __str__(self) -> str:
        where = f" ({self.field})" if self.field else ""
        if self.status is None:
            return f"{self.message}{where}"
        return f"{self.status} {self.code}: {self.message}{where}"


class NotAuthenticatedError(LabSpawnerError):
    """401: no token, or one Gafaelfawr does not know. Get a new token."""


class PermissionDeniedError(LabSpawnerError):
    """403: the token lacks the scope, or acts for another user."""


class NotFoundError(LabSpawnerError):
    """404: no such lab (or no operation to follow)."""


class ConflictError(LabSpawnerError):
    """409: a lab that has not failed already exists for this user."""


class InvalidRequestError(LabSpawnerError):
    """422 (or another 4xx): the request was wrong; ``field`` names the part that was."""


class ServiceUnavailableError(LabSpawnerError):
    """503 or 5xx, or the service could not be reached at all: try again later."""


class LabFailedError(LabSpawnerError):
    """A spawn or delete that was waited for ended in ``failed``."""


class ClusterFailedError(LabSpawnerError):
    """A compute cluster that was waited for ended in ``failed``."""


class AppFailedError(LabSpawnerError):
    """An app that was waited for went into ``Error``; the message says why."""


class KernelFailedError(LabSpawnerError):
    """A remote kernel that was waited for failed or exited before it ran; the message says
    why, as the service recorded it."""


_BY_STATUS: dict[int, type[LabSpawnerError]] = {
    401: NotAuthenticatedError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: InvalidRequestError,
}


def error_for(status: int, body: Any, reason: str = "") -> LabSpawnerError:
    """The exception for an HTTP error answer; ``body`` is its decoded JSON, if it was JSON."""
    code = "error"
    message = reason or f"HTTP {status}"
    field = None
    if isinstance(body, dict):
        code = str(body.get("code") or code)
        message = str(body.get("message") or message)
        field = body.get("field")
    if status in _BY_STATUS:
        cls = _BY_STATUS[status]
    elif status >= 500:
        cls = ServiceUnavailableError
    elif 400 <= status < 500:
        cls = InvalidRequestError
    else:
        cls = LabSpawnerError
    return cls(message, code=code, status=status, field=field)

"""Errors the service reports to its callers.

Every error leaves the service as the same JSON shape (see ``app.schemas.errors``): a
machine-readable ``code``, a human ``message`` and, for input problems, the ``field`` at fault.
Services raise these; the HTTP layer turns them into responses.
"""

from __future__ import annotations


class ServiceError(Exception):
    """Base of every error with a defined HTTP status and code."""

    status: int = 500
    code: str = "internal_error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidRequestError(ServiceError):
    """The request body or parameters are malformed or name something unknown."""

    status = 422
    code = "invalid_request"


class AuthenticationError(ServiceError):
    """No token, or a token Gafaelfawr does not recognise."""

    status = 401
    code = "not_authenticated"


class PermissionDeniedError(ServiceError):
    """A valid token without the scope or identity the route needs."""

    status = 403
    code = "permission_denied"


class NotFoundError(ServiceError):
    """The named object does not exist."""

    status = 404
    code = "not_found"


class ConflictError(ServiceError):
    """The request contradicts the current state (for example, a lab already exists)."""

    status = 409
    code = "conflict"


class OperationInProgressError(ConflictError):
    """A conflict with an operation under way (the lab is being deleted): the same 409
    ``conflict``, told apart for clients that name it (nublado's ``operation_in_progress``)."""


class DeleteFailedError(ServiceError):
    """A deletion the caller waited for failed or did not end in time (nublado's answer to a
    ``DELETE`` of a lab it created); the message says why."""

    status = 500
    code = "delete_failed"


class QuotaExceededError(ServiceError):
    """The request would take its user past a limit of their budget; nothing was created."""

    status = 409
    code = "quota_exceeded"


class DependencyUnavailableError(ServiceError):
    """A service we depend on (Gafaelfawr, Redis, Kubernetes) did not answer usefully."""

    status = 503
    code = "dependency_unavailable"


class RetryLaterError(ServiceError):
    """Base of the errors answered with a ``Retry-After`` header: the same request may
    succeed once ``retry_after`` seconds have passed."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RebuildingError(RetryLaterError):
    """The service's state is being rebuilt from Kubernetes (Redis came back empty): the
    answer is not known yet, so ask again after Retry-After seconds."""

    status = 503
    code = "rebuilding"

    def __init__(
        self,
        message: str = "the service is rebuilding its state from Kubernetes; ask again shortly",
        *,
        retry_after: int = 2,
    ) -> None:
        super().__init__(message, retry_after=retry_after)


class MaintenanceError(RetryLaterError):
    """Maintenance mode is on: new creations are refused until it ends; what runs is left
    alone. The message is the administrators'."""

    status = 503
    code = "maintenance"

    def __init__(self, message: str, *, retry_after: int = 60) -> None:
        super().__init__(message, retry_after=retry_after)


class TooManyRequestsError(RetryLaterError):
    """Past a limit (a lab's or a worker's open event streams, a lab's spawns and deletes
    or a group's creations in a minute): try again after Retry-After seconds."""

    status = 429
    code = "too_many_requests"


class QueueFullError(RetryLaterError):
    """Creations beyond those in progress wait in a queue, and it is full: the service is
    at capacity, not the caller at fault. Try again after Retry-After seconds."""

    status = 503
    code = "queue_full"


class BodyTooLargeError(ServiceError):
    """The request body is larger than the service accepts."""

    status = 413
    code = "body_too_large"


# The cluster scaler API's own codes, as its design gives them (``/ddl_cluster_scaler/``).


class InvalidKindError(ServiceError):
    """The path names a kind of cluster the service does not offer."""

    status = 400
    code = "invalid_kind"


class BadRequestError(ServiceError):
    """A scaler request's body or query is missing something or holds a bad value."""

    status = 400
    code = "bad_request"


class InvalidHardwareTierError(ServiceError):
    """The named hardware tier does not exist, or is restricted to other kinds."""

    status = 400
    code = "invalid_hw_tier"


class UnauthorizedError(ServiceError):
    """The caller is neither an administrator nor the cluster's owner."""

    status = 403
    code = "unauthorized"


class NotScalableError(ServiceError):
    """The cluster cannot be scaled now (it is not running, or an operation holds it)."""

    status = 409
    code = "not_scalable"


class ClusterNotFoundError(ServiceError):
    """No cluster of that kind and name."""

    status = 404
    code = "not_found"


class NotSupportedError(ServiceError):
    """The cluster's resource has no head spec to change, or cannot change it now."""

    status = 409
    code = "not_supported"


class HeadPodNotFoundError(ServiceError):
    """The cluster has no head pod (its operator has not made one yet, or it is gone)."""

    status = 404
    code = "head_pod_not_found"


class NotConfiguredError(ServiceError):
    """The deployment has not configured what the request needs; the message names the setting."""

    status = 409
    code = "not_configured"


BUDGETED_CREATION_ERRORS: tuple[type[ServiceError], ...] = (
    InvalidRequestError,
    ConflictError,
    QuotaExceededError,
    TooManyRequestsError,
    RebuildingError,
    DependencyUnavailableError,
    QueueFullError,
)
"""What creating a workload that counts against a budget or quota can answer: its checks,
an existing workload, the budget, the caller's rate, a rebuild, the budget's lock or a
dependency, and fair admission's full queue."""

EVENT_STREAM_ERRORS: tuple[type[ServiceError], ...] = (
    InvalidRequestError,
    NotFoundError,
    RebuildingError,
    TooManyRequestsError,
)
"""What opening a workload's event stream can answer: a bad ``Last-Event-ID``, no such
workload or operation, a rebuild, and the caller's stream cap."""

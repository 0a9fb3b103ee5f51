"""nublado's lab routes: the names its controller gave DMTN-222's create and form routes.

nublado's controller, DMTN-222's implementation in production, renamed two routes, and its
JupyterHub spawner calls them by those names: ``POST /spawner/v1/labs/<user>/create`` (201 with
``Location``) and ``GET /spawner/v1/lab-form/<user>``. The same services answer here as on
DMTN-222's ``/spawn`` and ``/spawn-form``, with the same body, tokens, checks and limits. What
differs is what nublado's spawner reads:

- the form's debug switch is ``enable_debug``;
- a lab created here keeps nublado's manners for its life (``LabApi.NUBLADO``): its event
  stream's ``data`` is nublado's JSON and its ``DELETE`` answers 204 once it is gone (see
  ``blueprints.spawner``);
- errors of these two routes come in the body nublado's controller (FastAPI) gives,
  ``{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}``, with its ``type`` names. The
  status codes are this service's, the same as on DMTN-222's routes.
"""

from __future__ import annotations

from typing import Any

from flask import Response, url_for

from app.errors import (
    AuthenticationError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    OperationInProgressError,
    PermissionDeniedError,
    QuotaExceededError,
    ServiceError,
)
from app.models.lab import LabApi
from app.schemas.errors import NubladoErrorSchema
from app.services.auth import OWNER
from app.web.api import ApiBlueprint, raises
from blueprints.spawner import (
    DELEGATED_TOKEN,
    LAB_LOCATION,
    SPAWN_ERRORS,
    SPAWN_REQUEST,
    queue_spawn,
    render_spawn_form,
)
from blueprints.support.auth import requires

ERROR_TYPES: dict[type[ServiceError], str] = {
    AuthenticationError: "invalid_token",
    PermissionDeniedError: "permission_denied",
    OperationInProgressError: "operation_in_progress",
    ConflictError: "lab_exists",
    QuotaExceededError: "insufficient_quota",
    NotFoundError: "unknown_user",
    InvalidRequestError: "value_error",
}
"""nublado's ``type`` for this service's errors; any other keeps its ``code``."""

FIELD_TYPES = (("options.size", "invalid_lab_size"), ("options.image", "unknown_image"))
"""nublado's ``type`` for a 422 by the field at fault (``options.image*`` covers every way
of choosing an image); another field's is pydantic's ``value_error``."""

PATH_FIELDS = frozenset({"username"})


def nublado_error_body(
    error: type[ServiceError], message: str, field: str | None = None
) -> dict[str, Any]:
    """An error as nublado's controller words it."""
    kind = next((t for cls, t in ERROR_TYPES.items() if issubclass(error, cls)), error.code)
    if issubclass(error, InvalidRequestError):
        kind = next((t for prefix, t in FIELD_TYPES if (field or "").startswith(prefix)), kind)
    detail: dict[str, Any] = {"msg": message, "type": kind}
    if field:
        detail["loc"] = ["path" if field in PATH_FIELDS else "body", *field.split(".")]
    return {"detail": [detail]}


nublado = ApiBlueprint(
    "nublado",
    __name__,
    url_prefix="/spawner/v1",
    error_body=nublado_error_body,
    error_schema=NubladoErrorSchema,
)


@nublado.post("/labs/<username>/create")
@nublado.response(
    201,
    description=(
        "Spawn queued (nublado's answer to its spawner); `Location` is the lab's status. The "
        "lab's events and its `DELETE` then follow nublado's manners."
    ),
    headers=LAB_LOCATION,
)
@nublado.doc(parameters=[DELEGATED_TOKEN])
@raises(*SPAWN_ERRORS)
@requires(OWNER, with_user=True)
@nublado.arguments(SPAWN_REQUEST)
def create_lab(body: dict[str, Any], username: str) -> Response:
    """Queue a spawn as nublado's spawner asks for it; 201 with the lab's status as
    ``Location``.

    The body, its options and the checks are `POST .../spawn`'s; errors come in nublado's
    body, `{"detail": [{"loc", "msg", "type"}]}`, with nublado's `type` names
    (`lab_exists`, `operation_in_progress`, `invalid_lab_size`, `unknown_image`,
    `permission_denied`, `invalid_token`...)."""
    queue_spawn(username, body, LabApi.NUBLADO)
    response = Response(status=201)
    response.headers["Location"] = url_for("spawner.lab_status", username=username)
    return response


@nublado.get("/lab-form/<username>")
@nublado.text_response(
    "text/html",
    description=(
        "The spawn form of `GET .../spawn-form`, its debug switch named `enable_debug` as "
        "nublado's form names it."
    ),
    example='<div class="lab-spawner-form">...</div>',
)
@requires(OWNER, with_user=True)
def lab_form(username: str) -> Response:
    """The spawn form for this user, with nublado's field names."""
    return render_spawn_form(debug_field="enable_debug")

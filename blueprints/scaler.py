"""The cluster scaler API (``/ddl_cluster_scaler/``): list, read and scale users' clusters,
change their tiers and restart their heads, with the routes, bodies, answers and error codes of
the design it follows."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify

from app.errors import (
    BadRequestError,
    ClusterNotFoundError,
    DependencyUnavailableError,
    HeadPodNotFoundError,
    InvalidHardwareTierError,
    InvalidKindError,
    NotScalableError,
    NotSupportedError,
    QuotaExceededError,
    RebuildingError,
    TooManyRequestsError,
    UnauthorizedError,
)
from app.extensions import labs_ext, limits_ext
from app.services.auth import ADMIN, ANY_USER
from app.web.api import ApiBlueprint, raises
from app.workloads.cluster.scaler import ScalerService
from app.workloads.cluster.schemas import (
    ClusterListSchema,
    HeadTieredSchema,
    HeadTierRequestSchema,
    OperatorObjectSchema,
    RestartedSchema,
    RestartStatusQuerySchema,
    RestartStatusSchema,
    ScaledSchema,
    ScaleRequestSchema,
)
from blueprints.support.auth import current_caller, current_user, requires

scaler = ApiBlueprint(
    "scaler", __name__, url_prefix="/ddl_cluster_scaler", body_error=BadRequestError
)

CHANGE_ERRORS = (
    TooManyRequestsError,
    InvalidKindError,
    BadRequestError,
    InvalidHardwareTierError,
    UnauthorizedError,
    ClusterNotFoundError,
    QuotaExceededError,
    DependencyUnavailableError,
    RebuildingError,
)
"""What a change of a cluster (its workers or a tier) may be refused with."""


def _service() -> ScalerService:
    return ScalerService(labs_ext.context, labs_ext.engine)


@scaler.get("/list/<kind>")
@scaler.response(
    200, ClusterListSchema, description="An administrator's every cluster, a user's own."
)
@raises(InvalidKindError, RebuildingError)
@requires(ANY_USER, ADMIN)
def list_clusters(kind: str) -> Response:
    """Clusters of a kind."""
    return jsonify(_service().of_kind(current_caller(), kind))


@scaler.get("/cluster/<kind>/<name>")
@scaler.response(200, OperatorObjectSchema)
@raises(InvalidKindError, ClusterNotFoundError, UnauthorizedError, RebuildingError)
@requires(ANY_USER, ADMIN)
def get_cluster(kind: str, name: str) -> Response:
    """One cluster's object."""
    return jsonify(_service().object(current_caller(), kind, name))


@scaler.patch("/scale/<kind>/<name>")
@scaler.response(200, ScaledSchema)
@raises(*CHANGE_ERRORS, NotScalableError)
@requires(ANY_USER, ADMIN, with_user=True)
@scaler.arguments(ScaleRequestSchema())
def scale_cluster(body: dict[str, Any], kind: str, name: str) -> Response:
    """Set a cluster's workers, capped at its maximum (never raised), optionally with a new
    hardware tier for them."""
    caller = current_caller()
    with limits_ext.limits.change(caller, "cluster"):
        return jsonify(_service().scale(caller, current_user(), kind, name, body))


@scaler.patch("/head-hw-tier/<kind>/<name>")
@scaler.response(200, HeadTieredSchema)
@raises(*CHANGE_ERRORS, NotSupportedError)
@requires(ANY_USER, ADMIN, with_user=True)
@scaler.arguments(HeadTierRequestSchema())
def head_hw_tier(body: dict[str, Any], kind: str, name: str) -> Response:
    """Give a cluster's head (scheduler, server) a hardware tier; the head takes it when it
    is next made, as after `restart_head`."""
    caller = current_caller()
    with limits_ext.limits.change(caller, "cluster"):
        return jsonify(_service().head_tier(caller, current_user(), kind, name, body))


@scaler.patch("/restart_head/<kind>/<name>")
@scaler.response(202, RestartedSchema)
@raises(InvalidKindError, UnauthorizedError, ClusterNotFoundError, HeadPodNotFoundError)
@raises(TooManyRequestsError, DependencyUnavailableError, RebuildingError)
@requires(ANY_USER, ADMIN)
def restart_head(kind: str, name: str) -> tuple[Response, int]:
    """Delete a cluster's head pod with a 20 s grace period and answer once it is deleted;
    its operator makes it again."""
    caller = current_caller()
    with limits_ext.limits.change(caller, "cluster"):
        return jsonify(_service().restart_head(caller, kind, name)), 202


@scaler.get("/restart_head_status/<kind>/<name>")
@scaler.response(200, RestartStatusSchema)
@raises(
    InvalidKindError,
    BadRequestError,
    UnauthorizedError,
    ClusterNotFoundError,
    HeadPodNotFoundError,
    RebuildingError,
)
@requires(ANY_USER, ADMIN)
@scaler.arguments(RestartStatusQuerySchema(), location="query")
def restart_head_status(query: dict[str, Any], kind: str, name: str) -> Response:
    """Whether the head was made again since `started_at` (required) and is ready."""
    started_at = query.get("started_at")
    return jsonify(_service().restart_head_status(current_caller(), kind, name, started_at))

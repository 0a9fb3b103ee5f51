"""The cluster scaler API (``/ddl_cluster_scaler/``): list, read and scale users' clusters,
with the routes, bodies, answers and error codes of the design it follows."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify, request

from app.errors import (
    BadRequestError,
    ClusterNotFoundError,
    DependencyUnavailableError,
    InvalidHardwareTierError,
    InvalidKindError,
    NotScalableError,
    QuotaExceededError,
    UnauthorizedError,
)
from app.extensions import labs_ext
from app.services.auth import ADMIN, ANY_USER
from app.services.scaler import ScalerService
from app.web.api import ApiBlueprint, raises
from app.web.auth import current_caller, current_user, requires

scaler = ApiBlueprint("scaler", __name__, url_prefix="/ddl_cluster_scaler")

KIND_LIST = {
    "type": "object",
    "required": ["kind", "count", "clusters"],
    "properties": {
        "kind": {"type": "string"},
        "count": {"type": "integer"},
        "clusters": {"type": "array", "items": {"type": "object"}},
    },
}
OBJECT = {"type": "object", "description": "The operator's object, as Kubernetes has it."}
SCALED = {
    "type": "object",
    "required": ["kind", "name", "requested_replicas", "effective_replicas", "maxReplicas"],
    "properties": {
        "kind": {"type": "string"},
        "name": {"type": "string"},
        "requested_replicas": {"type": "integer"},
        "effective_replicas": {"type": "integer"},
        "maxReplicas": {"type": "integer"},
        "capped": {"type": "boolean"},
        "worker_hw_tier_id": {"type": "object", "description": "The tier, when one was given."},
    },
}
SCALE_BODY = {
    "type": "object",
    "required": ["replicas"],
    "properties": {
        "replicas": {"type": "integer", "minimum": 0},
        "worker_hw_tier_name": {"type": "string"},
    },
}


def _service() -> ScalerService:
    return ScalerService(labs_ext.context, labs_ext.engine)


def _body() -> dict[str, Any]:
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise BadRequestError("the request body must be a JSON object")
    return data


@scaler.get("/list/<kind>")
@scaler.response(200, KIND_LIST, description="An administrator's every cluster, a user's own.")
@raises(InvalidKindError)
@requires(ANY_USER, ADMIN)
def list_clusters(kind: str) -> Response:
    """Clusters of a kind."""
    return jsonify(_service().list(current_caller(), kind))


@scaler.get("/cluster/<kind>/<name>")
@scaler.response(200, OBJECT)
@raises(InvalidKindError, ClusterNotFoundError, UnauthorizedError)
@requires(ANY_USER, ADMIN)
def get_cluster(kind: str, name: str) -> Response:
    """One cluster's object."""
    return jsonify(_service().object(current_caller(), kind, name))


@scaler.patch("/scale/<kind>/<name>")
@scaler.request_body(SCALE_BODY)
@scaler.response(200, SCALED)
@raises(
    InvalidKindError,
    BadRequestError,
    InvalidHardwareTierError,
    UnauthorizedError,
    ClusterNotFoundError,
    NotScalableError,
    QuotaExceededError,
    DependencyUnavailableError,
)
@requires(ANY_USER, ADMIN, with_user=True)
def scale_cluster(kind: str, name: str) -> Response:
    """Set a cluster's workers, capped at its maximum (never raised), optionally with a new
    hardware tier for them."""
    return jsonify(_service().scale(current_caller(), current_user(), kind, name, _body()))

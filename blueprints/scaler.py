"""The cluster scaler API (``/ddl_cluster_scaler/``): list, read and scale users' clusters,
change their tiers and restart their heads, with the routes, bodies, answers and error codes of
the design it follows."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify, request

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
from app.web.auth import current_caller, current_user, requires
from app.web.bodies import json_object
from app.workloads.cluster.scaler import ScalerService

scaler = ApiBlueprint(
    "scaler", __name__, url_prefix="/ddl_cluster_scaler", body_error=BadRequestError
)

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

HEAD_TIER_BODY = {
    "type": "object",
    "required": ["head_hw_tier_name"],
    "properties": {"head_hw_tier_name": {"type": "string"}},
}
HEAD_TIERED = {
    "type": "object",
    "required": ["kind", "name", "head_hw_tier_name", "object"],
    "properties": {
        "kind": {"type": "string"},
        "name": {"type": "string"},
        "head_hw_tier_name": {"type": "string"},
        "object": {"type": "object", "description": "The patched object."},
    },
}
RESTARTED = {
    "type": "object",
    "required": ["ok", "namespace", "pod", "grace_period_seconds", "started_at"],
    "properties": {
        "ok": {"type": "boolean"},
        "namespace": {"type": "string"},
        "pod": {"type": "string", "description": "The head pod that was deleted."},
        "grace_period_seconds": {"type": "integer"},
        "started_at": {
            "type": "string",
            "format": "date-time",
            "description": "Pass it to `restart_head_status`.",
        },
        "k8s_response": {"type": "object", "description": "The API server's answer, in short."},
    },
}
RESTART_STATUS = {
    "type": "object",
    "required": ["ok", "restarted", "ready", "status", "namespace", "pod"],
    "properties": {
        "ok": {"type": "boolean", "description": "Restarted since `started_at`, and ready."},
        "restarted": {"type": "boolean"},
        "ready": {"type": "boolean"},
        "status": {
            "type": "string",
            "enum": ["restarted_and_ready", "restarted_not_ready", "not_restarted"],
        },
        "namespace": {"type": "string"},
        "pod": {"type": "string", "nullable": True, "description": "Null while there is no head."},
        "creationTimestamp": {"type": "string", "format": "date-time", "nullable": True},
        "started_at": {"type": "string", "format": "date-time"},
        "evaluated_with": {"type": "string"},
    },
}

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


def _body() -> dict[str, Any]:
    """The design answers a body it cannot use with 400 ``bad_request``."""
    return json_object(error=BadRequestError)


@scaler.get("/list/<kind>")
@scaler.response(200, KIND_LIST, description="An administrator's every cluster, a user's own.")
@raises(InvalidKindError, RebuildingError)
@requires(ANY_USER, ADMIN)
def list_clusters(kind: str) -> Response:
    """Clusters of a kind."""
    return jsonify(_service().of_kind(current_caller(), kind))


@scaler.get("/cluster/<kind>/<name>")
@scaler.response(200, OBJECT)
@raises(InvalidKindError, ClusterNotFoundError, UnauthorizedError, RebuildingError)
@requires(ANY_USER, ADMIN)
def get_cluster(kind: str, name: str) -> Response:
    """One cluster's object."""
    return jsonify(_service().object(current_caller(), kind, name))


@scaler.patch("/scale/<kind>/<name>")
@scaler.request_body(SCALE_BODY)
@scaler.response(200, SCALED)
@raises(*CHANGE_ERRORS, NotScalableError)
@requires(ANY_USER, ADMIN, with_user=True)
def scale_cluster(kind: str, name: str) -> Response:
    """Set a cluster's workers, capped at its maximum (never raised), optionally with a new
    hardware tier for them."""
    caller = current_caller()
    with limits_ext.limits.change(caller, "cluster"):
        return jsonify(_service().scale(caller, current_user(), kind, name, _body()))


@scaler.patch("/head-hw-tier/<kind>/<name>")
@scaler.request_body(HEAD_TIER_BODY)
@scaler.response(200, HEAD_TIERED)
@raises(*CHANGE_ERRORS, NotSupportedError)
@requires(ANY_USER, ADMIN, with_user=True)
def head_hw_tier(kind: str, name: str) -> Response:
    """Give a cluster's head (scheduler, server) a hardware tier; the head takes it when it
    is next made, as after `restart_head`."""
    caller = current_caller()
    with limits_ext.limits.change(caller, "cluster"):
        return jsonify(_service().head_tier(caller, current_user(), kind, name, _body()))


@scaler.patch("/restart_head/<kind>/<name>")
@scaler.response(202, RESTARTED)
@raises(InvalidKindError, UnauthorizedError, ClusterNotFoundError, HeadPodNotFoundError)
@raises(TooManyRequestsError, RebuildingError)
@requires(ANY_USER, ADMIN)
def restart_head(kind: str, name: str) -> tuple[Response, int]:
    """Delete a cluster's head pod with a 20 s grace period and return at once; its operator
    makes it again."""
    caller = current_caller()
    with limits_ext.limits.change(caller, "cluster"):
        return jsonify(_service().restart_head(caller, kind, name)), 202


@scaler.get("/restart_head_status/<kind>/<name>")
@scaler.response(200, RESTART_STATUS)
@scaler.doc(
    parameters=[
        {
            "in": "query",
            "name": "started_at",
            "required": True,
            "description": "`started_at` as `restart_head` returned it (ISO 8601).",
            "schema": {"type": "string", "format": "date-time"},
        }
    ]
)
@raises(
    InvalidKindError,
    BadRequestError,
    UnauthorizedError,
    ClusterNotFoundError,
    HeadPodNotFoundError,
    RebuildingError,
)
@requires(ANY_USER, ADMIN)
def restart_head_status(kind: str, name: str) -> Response:
    """Whether the head was made again since `started_at` (required) and is ready."""
    started_at = request.args.get("started_at")
    return jsonify(_service().restart_head_status(current_caller(), kind, name, started_at))

"""Users' compute clusters: create one beside the lab, list, read and delete them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from flask import Response

from app.errors import (
    ConflictError,
    DependencyUnavailableError,
    InvalidRequestError,
    NotFoundError,
    QueueFullError,
    QuotaExceededError,
    RebuildingError,
    TooManyRequestsError,
)
from app.extensions import labs_ext, limits_ext
from app.services.auth import ADMIN, OWNER
from app.web.api import ApiBlueprint, raises
from app.web.auth import current_caller, current_user, requires
from app.web.bodies import load_body
from app.web.event_stream import (
    STREAM_RETRY_SECONDS,
    documented_stream,
    last_event_id,
    open_stream,
    stream_description,
    stream_example,
)
from app.workloads.cluster.models import ClusterRecord
from app.workloads.cluster.schemas import ClusterRequestSchema, ClusterSchema
from app.workloads.cluster.service import ClusterRequest, ClusterService

clusters = ApiBlueprint("clusters", __name__, url_prefix="/spawner/v1")

_request = ClusterRequestSchema()


def _service() -> ClusterService:
    return ClusterService(labs_ext.context, labs_ext.engine)


def _body(record: ClusterRecord) -> dict[str, Any]:
    data = asdict(record)
    data["status"] = record.status.value
    return data


@clusters.post("/labs/<username>/clusters")
@clusters.request_body(ClusterRequestSchema)
@clusters.response(201, ClusterSchema, description="The cluster, starting.")
@raises(
    InvalidRequestError,
    ConflictError,
    QuotaExceededError,
    TooManyRequestsError,
    DependencyUnavailableError,
    QueueFullError,
)
@requires(OWNER, ADMIN, with_user=True)
def create_cluster(username: str) -> tuple[dict[str, Any], int]:
    """Create a cluster in the user's lab namespace, within their budget (the user's own,
    when an administrator creates it for them)."""
    with limits_ext.limits.change(current_caller(), "cluster"):
        request = ClusterRequest(**load_body(_request))
        return _body(_service().create(username, current_user(), request)), 201


@clusters.get("/labs/<username>/clusters")
@clusters.response(200, ClusterSchema(many=True))
@raises(RebuildingError)
@requires(OWNER, ADMIN)
def list_clusters(username: str) -> list[dict[str, Any]]:
    """The user's clusters."""
    return [_body(record) for record in _service().clusters_of(username)]


@clusters.get("/labs/<username>/clusters/<name>")
@clusters.response(200, ClusterSchema)
@raises(NotFoundError, RebuildingError)
@requires(OWNER, ADMIN)
def cluster(username: str, name: str) -> dict[str, Any]:
    """One of the user's clusters."""
    return _body(_service().cluster(username, name))


@clusters.delete("/labs/<username>/clusters/<name>")
@clusters.response(202, ClusterSchema, description="The cluster, terminating.")
@raises(NotFoundError, TooManyRequestsError)
@requires(OWNER, ADMIN)
def delete_cluster(username: str, name: str) -> tuple[dict[str, Any], int]:
    """Start deleting the cluster; 202, or 404 if there is none."""
    with limits_ext.limits.change(current_caller(), "cluster"):
        return _body(_service().delete(username, name)), 202


@clusters.get("/labs/<username>/clusters/<name>/events")
@documented_stream(
    clusters,
    description=stream_description("cluster", "creation or deletion"),
    example=stream_example("cluster", "daskcluster dask-1a2b3c requested"),
)
@raises(InvalidRequestError, NotFoundError, RebuildingError, TooManyRequestsError)
@requires(OWNER, ADMIN)
def cluster_events(username: str, name: str) -> Response:
    """Server-sent events of the cluster's current operation: replay, then follow until it
    ends."""
    after = last_event_id()
    release = limits_ext.limits.stream(current_caller(), retry_after=STREAM_RETRY_SECONDS)
    return open_stream(
        release, lambda: _service().events(username, name, after=after), noun="cluster"
    )

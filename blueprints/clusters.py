"""Users' compute clusters: create one beside the lab, list, read and delete them."""

from __future__ import annotations

from typing import Any

from app.errors import BUDGETED_CREATION_ERRORS, NotFoundError, TooManyRequestsError
from app.extensions import labs_ext, limits_ext
from app.services.auth import ADMIN, OWNER
from app.web.api import ApiBlueprint, raises
from app.workloads.cluster.models import ClusterRecord
from app.workloads.cluster.schemas import ClusterRequestSchema, ClusterSchema
from app.workloads.cluster.service import ClusterRequest, ClusterService
from blueprints.support.auth import current_caller, current_user, requires
from blueprints.support.beside_lab import BesideLabReads, add_beside_lab_reads

clusters = ApiBlueprint("clusters", __name__, url_prefix="/spawner/v1")


def _service() -> ClusterService:
    return ClusterService(labs_ext.context, labs_ext.engine)


@clusters.post("/labs/<username>/clusters")
@clusters.response(201, ClusterSchema, description="The cluster, starting.")
@raises(*BUDGETED_CREATION_ERRORS)
@requires(OWNER, ADMIN, with_user=True)
@clusters.arguments(ClusterRequestSchema())
def create_cluster(body: dict[str, Any], username: str) -> tuple[ClusterRecord, int]:
    """Create a cluster in the user's lab namespace, within their budget (the user's own,
    when an administrator creates it for them)."""
    with limits_ext.limits.change(current_caller(), "cluster"):
        return _service().create(username, current_user(), ClusterRequest(**body)), 201


@clusters.delete("/labs/<username>/clusters/<name>")
@clusters.response(202, ClusterSchema, description="The cluster, terminating.")
@raises(NotFoundError, TooManyRequestsError)
@requires(OWNER, ADMIN)
def delete_cluster(username: str, name: str) -> tuple[ClusterRecord, int]:
    """Start deleting the cluster; 202, or 404 if there is none."""
    with limits_ext.limits.change(current_caller(), "cluster"):
        return _service().delete(username, name), 202


add_beside_lab_reads(
    clusters,
    BesideLabReads(
        plural="clusters",
        noun="cluster",
        key="name",
        schema=ClusterSchema,
        service=_service,
        listed_doc="The user's clusters.",
        operations="creation or deletion",
        first_event="daskcluster dask-1a2b3c requested",
    ),
)

"""Routes for administrators: the service's own state, and its live feed."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, stream_with_context

from app.extensions import labs_ext
from app.openapi import Body, documented
from app.schemas.admin import OperationStatusSchema
from app.services.admin import follow_feed, operations_in_progress
from app.services.auth import ADMIN
from app.web.auth import requires

admin = Blueprint("admin", __name__, url_prefix="/spawner/v1")

_operations_schema = OperationStatusSchema(many=True)

ADMIN_FEED = Body(
    description=(
        "Server-sent events, live: `workload` when a workload's state changes (data: "
        "`kind`, `name`, `status`; `deleted` when it is gone) and `prepull` after a "
        "prepuller pass that started, finished or failed pulls (data: counts). A "
        "subscriber sees what happens while it listens; nothing is replayed."
    ),
    schema={"type": "string"},
    content_type="text/event-stream",
    headers={"Cache-Control": "Always `no-cache`: the feed is live."},
    example=(
        ": live feed\n\n"
        'event:workload\ndata:{"kind": "lab", "name": "rachel", "status": "running"}\n\n'
    ),
)


@admin.get("/operations")
@documented(responses={200: OperationStatusSchema(many=True)})
@requires(ADMIN)
def list_operations() -> Response:
    """Spawns and deletes in progress, with the worker running each."""
    return jsonify(_operations_schema.dump(operations_in_progress(labs_ext.engine.store)))


@admin.get("/admin/stream")
@documented(responses={200: ADMIN_FEED})
@requires(ADMIN)
def admin_stream() -> Response:
    """Live feed of workload state changes and prepull progress."""
    feed = stream_with_context(follow_feed(labs_ext.engine.store))
    response = Response(feed, mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"
    return response

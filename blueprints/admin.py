"""Routes for administrators: the service's own state, and its live feed."""

from __future__ import annotations

from typing import Any

from flask import Response, stream_with_context

from app.extensions import labs_ext
from app.schemas.admin import OperationStatusSchema
from app.services.admin import follow_feed, operations_in_progress
from app.services.auth import ADMIN
from app.web.api import ApiBlueprint
from app.web.auth import requires

admin = ApiBlueprint("admin", __name__, url_prefix="/spawner/v1")

ADMIN_FEED_TEXT = (
    "Server-sent events, live: `workload` when a workload's state changes (data: "
    "`kind`, `name`, `status`; `deleted` when it is gone) and `prepull` after a "
    "prepuller pass that started, finished or failed pulls (data: counts). A "
    "subscriber sees what happens while it listens; nothing is replayed."
)


@admin.get("/operations")
@admin.response(200, OperationStatusSchema(many=True))
@requires(ADMIN)
def list_operations() -> list[dict[str, Any]]:
    """Spawns and deletes in progress, with the worker running each."""
    return operations_in_progress(labs_ext.engine.store)


@admin.get("/admin/stream")
@admin.response(
    200,
    {
        "type": "object",
        "description": "One server-sent event (the feed is a sequence of them).",
        "required": ["event", "data"],
        "properties": {
            "event": {"type": "string", "enum": ["workload", "prepull"]},
            "data": {"type": "string", "description": "A JSON object."},
        },
    },
    content_type="text/event-stream",
    description=ADMIN_FEED_TEXT,
    example=(
        ": live feed\n\n"
        'event:workload\ndata:{"kind": "lab", "name": "rachel", "status": "running"}\n\n'
    ),
    headers={
        "Cache-Control": {
            "description": "Always `no-cache`: the feed is live.",
            "schema": {"type": "string"},
        }
    },
)
@requires(ADMIN)
def admin_stream() -> Response:
    """Live feed of workload state changes and prepull progress."""
    feed = stream_with_context(follow_feed(labs_ext.engine.store))
    response = Response(feed, mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"
    return response

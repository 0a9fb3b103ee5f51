"""Routes for administrators: the service's own state, its live feed, and the actions an
on-call administrator takes without ``kubectl`` (each one recorded in the audit log)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from flask import Response, stream_with_context

from app.errors import (
    InvalidRequestError,
    NotFoundError,
    RebuildingError,
    TooManyRequestsError,
)
from app.extensions import labs_ext, limits_ext, redis_ext
from app.extensions.redis import feed_events
from app.schemas.admin import (
    AuditEntrySchema,
    AuditQuerySchema,
    DropFailedQuerySchema,
    DroppedLabsSchema,
    FailedLabSchema,
    FailedLabsQuerySchema,
    ForceDeleteSchema,
    LeaderSchema,
    MaintenanceRequestSchema,
    MaintenanceSchema,
    OperationStatusSchema,
    ProvisionedResetSchema,
    ReconcileSchema,
)
from app.services.admin import (
    follow_feed,
    leaders,
    maintenance_state,
    operations_in_progress,
    reconcile_now,
    reset_provisioned,
    turn_maintenance_off,
    turn_maintenance_on,
)
from app.services.auth import ADMIN
from app.web.api import ApiBlueprint, raises
from app.web.event_stream import STREAM_RETRY_SECONDS
from app.workloads.lab.service import LabService
from blueprints.support.audit import audited
from blueprints.support.auth import current_caller, requires

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
    """Spawns and deletes in progress, with the worker running each, then the creations
    waiting for a place (fair admission) with their position."""
    admission = labs_ext.engine.admission
    queue = admission.store if admission is not None and admission.enabled else None
    return operations_in_progress(labs_ext.engine.workloads, queue)


@admin.get("/leaders")
@admin.response(200, LeaderSchema(many=True))
@requires(ADMIN)
def list_leaders() -> list[dict[str, Any]]:
    """Each elected loop (the lab watcher and its reconcile, the image refresher, the
    prepuller) with the replica and worker leading it and its lease's expiry."""
    return leaders(redis_ext.client, labs_ext.machinery.elections())


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
@raises(TooManyRequestsError)
@requires(ADMIN)
def admin_stream() -> Response:
    """Live feed of workload state changes and prepull progress."""
    # It holds a connection like any event stream, so it counts toward the worker's cap.
    release = limits_ext.limits.streams.acquire(None, retry_after=STREAM_RETRY_SECONDS)
    try:
        feed = stream_with_context(follow_feed(labs_ext.engine.workloads.feed_channel, feed_events))
    except BaseException:
        release()
        raise
    response = Response(_CountedFeed(feed, release), mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"
    return response


class _CountedFeed:
    """The feed's body, holding its place among the worker's open streams until the
    server closes it, which it does even if the body was never iterated."""

    def __init__(self, feed: Iterator[str], release: Callable[[], None]) -> None:
        self._feed = feed
        self._release = release

    def __iter__(self) -> Iterator[str]:
        return self._feed

    def close(self) -> None:
        try:
            close = getattr(self._feed, "close", None)
            if close is not None:
                close()
        finally:
            self._release()


@admin.get("/admin/audit")
@admin.response(200, AuditEntrySchema(many=True))
@requires(ADMIN)
@admin.arguments(AuditQuerySchema(), location="query")
def audit_log(query: dict[str, Any]) -> list[dict[str, Any]]:
    """Administrators' actions, newest first: who did what to what, when, and the answer."""
    return [vars(entry) for entry in labs_ext.machinery.audit.entries(limit=query["limit"])]


@admin.get("/admin/maintenance")
@admin.response(200, MaintenanceSchema)
@requires(ADMIN)
def maintenance() -> dict[str, Any]:
    """Whether maintenance mode is on, with its message."""
    return maintenance_state(labs_ext.machinery.maintenance)


@admin.put("/admin/maintenance")
@admin.response(200, MaintenanceSchema)
@requires(ADMIN)
@audited("maintenance.on")
@admin.arguments(MaintenanceRequestSchema())
def maintenance_on(body: dict[str, Any]) -> dict[str, Any]:
    """Turn maintenance mode on (or change its message): new spawns, clusters, kernels and
    apps are refused with 503 `maintenance` and the message, which the spawn form shows;
    running workloads are left alone, and deletes go on."""
    by = current_caller().username
    return turn_maintenance_on(labs_ext.machinery.maintenance, message=body["message"], by=by)


@admin.delete("/admin/maintenance")
@admin.response(200, MaintenanceSchema)
@requires(ADMIN)
@audited("maintenance.off")
def maintenance_off() -> dict[str, Any]:
    """Turn maintenance mode off: creations are taken again."""
    return turn_maintenance_off(labs_ext.machinery.maintenance)


@admin.post("/admin/reconcile")
@admin.response(200, ReconcileSchema, description="The reconcile ran.")
@admin.alt_response(
    202, schema=ReconcileSchema, description="Asked for; it did not end within 30 s."
)
@requires(ADMIN)
@audited("reconcile")
def reconcile() -> tuple[dict[str, Any], int]:
    """Reconcile Redis with Kubernetes now, in the elected watcher wherever it leads, rather
    than at its next turn; waits up to 30 s for it to end."""
    return reconcile_now(labs_ext.machinery.watcher.requests)


@admin.delete("/admin/labs/<username>/provisioned")
@admin.response(200, ProvisionedResetSchema)
@requires(ADMIN)
@audited("provisioned.reset")
def reset_provisioned_flag(username: str) -> dict[str, Any]:
    """Forget that the user was provisioned: their next spawn runs the provisioning init
    containers again."""
    return reset_provisioned(labs_ext.context.labs, username)


@admin.post("/admin/labs/<username>/force-delete")
@admin.response(202, ForceDeleteSchema)
@raises(NotFoundError, RebuildingError)
@requires(ADMIN)
@audited("lab.force-delete", status=202)
def force_delete_lab(username: str) -> dict[str, Any]:
    """Delete a lab stuck terminating: its deletion is started if none is under way, and
    its pod removed without a grace period (its node may never confirm it stopped)."""
    LabService(labs_ext.context, labs_ext.engine).force_delete(username)
    return {"username": username, "status": "terminating", "detail": "pod removed at once"}


@admin.get("/admin/failed-labs")
@admin.response(200, FailedLabSchema(many=True))
@raises(RebuildingError)
@requires(ADMIN)
@admin.arguments(FailedLabsQuerySchema(), location="query")
def failed_labs(query: dict[str, Any]) -> list[dict[str, Any]]:
    """Labs whose spawn failed or whose pod stopped for good, with when each failed: they
    keep their record until their user spawns again, or they are dropped."""
    service = LabService(labs_ext.context, labs_ext.engine)
    failed = service.failed(limit=query["limit"])
    return [{"username": f.name, "failed_at": f.failed_at} for f in failed]


@admin.delete("/admin/failed-labs")
@admin.response(202, DroppedLabsSchema)
@raises(InvalidRequestError, RebuildingError)
@requires(ADMIN)
@audited("failed-labs.drop", status=202)
@admin.arguments(DropFailedQuerySchema(), location="query")
def drop_failed_labs(query: dict[str, Any]) -> dict[str, Any]:
    """Delete the labs that failed longer ago than the given age, as the elected watcher
    does by itself after each reconcile: each an ordinary deletion, namespace included,
    unless its user is spawning again."""
    older_than = query.get("older_than_seconds")
    if older_than is None:
        older_than = labs_ext.context.config.admin.drop_failed_labs_after_seconds
        if older_than <= 0:
            raise InvalidRequestError(
                "older_than_seconds: required, as admin.dropFailedLabsAfterSeconds is 0",
                field="older_than_seconds",
            )
    service = LabService(labs_ext.context, labs_ext.engine)
    dropped = service.drop_failed(older_than_seconds=older_than)
    return {
        "older_than_seconds": older_than,
        "dropped": [{"username": f.name, "failed_at": f.failed_at} for f in dropped],
        "detail": f"deleting {len(dropped)} failed labs older than {older_than:g} s",
    }

"""Routes for administrators: the service's own state, and its live feed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from flask import Response, stream_with_context

from app.errors import TooManyRequestsError
from app.extensions import labs_ext, limits_ext, redis_ext
from app.schemas.admin import LeaderSchema, OperationStatusSchema
from app.services.admin import follow_feed, leaders, operations_in_progress
from app.services.auth import ADMIN
from app.web.api import ApiBlueprint, raises
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
    release = limits_ext.limits.streams.acquire(None, retry_after=_STREAM_RETRY_SECONDS)
    try:
        feed = stream_with_context(follow_feed(labs_ext.engine.store))
    except BaseException:
        release()
        raise
    response = Response(_CountedFeed(feed, release), mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"
    return response


_STREAM_RETRY_SECONDS = 5
"""Retry-After of a feed refused at the worker's cap on open streams."""


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

"""Bodies of the administrators' routes."""

from __future__ import annotations

from marshmallow import Schema, fields, validate


def unix_time(moment: str = "", *, nullable: bool = False) -> fields.Float:
    """A moment as these bodies give it, in seconds since the epoch; ``moment`` says which
    ("it ended")."""
    description = f"Unix time {moment}." if moment else "Unix time."
    return fields.Float(required=True, allow_none=nullable, metadata={"description": description})


class OperationStatusSchema(Schema):
    """An operation in progress, and which worker runs it; or waiting for a place."""

    username = fields.String(
        required=True,
        metadata={"description": "The workload's name: the username for a lab."},
    )
    workload = fields.String(
        required=True,
        metadata={"description": "Its kind: `lab`, `cluster`, `kernel`, `app`, `image`."},
    )
    kind = fields.String(required=True, validate=validate.OneOf(["spawn", "delete"]))
    id = fields.String(required=True)
    started = unix_time()
    deadline = unix_time()
    worker = fields.String(
        allow_none=True,
        metadata={
            "description": "The worker holding the lease (host:pid:id); null while orphaned "
            "or waiting."
        },
    )
    position = fields.Integer(
        metadata={"description": "Waiting for a place: its place in the admission queue."}
    )
    group = fields.String(
        metadata={"description": "Waiting for a place: the admission group it waits with."}
    )


class ReplicaSchema(Schema):
    """A replica of the service: one gunicorn master and its workers."""

    name = fields.String(required=True, metadata={"description": "The replica's name."})
    url = fields.String(
        required=True,
        metadata={"description": "Where it answers directly (empty when not configured)."},
    )
    pid = fields.Integer(required=True, metadata={"description": "Its master's process id."})


class LeaderSchema(Schema):
    """One elected loop and who leads it."""

    loop = fields.String(
        required=True,
        metadata={"description": "The loop: `lab-watcher`, `image-refresher`, `prepuller`."},
    )
    leader = fields.Nested(
        lambda: LeadershipSchema(),
        allow_none=True,
        required=True,
        metadata={"description": "Who leads it; null while nobody does (an election is due)."},
    )


class LeadershipSchema(Schema):
    """The holder of an elected loop's lease."""

    replica = fields.Nested(ReplicaSchema, required=True)
    worker = fields.String(
        required=True, metadata={"description": "The worker's lease identity (host:pid:id)."}
    )
    worker_pid = fields.Integer(required=True, metadata={"description": "The worker's pid."})
    token = fields.Integer(
        required=True,
        metadata={"description": "The fencing token: one more at every election of the loop."},
    )
    since = unix_time("of the election")
    expires_in = fields.Float(
        required=True,
        metadata={"description": "Seconds until the lease expires unless its holder renews it."},
    )


class AuditEntrySchema(Schema):
    """One administrator's action."""

    at = unix_time("it ended")
    actor = fields.String(required=True, metadata={"description": "The administrator."})
    action = fields.String(
        required=True,
        metadata={
            "description": "`maintenance.on`, `maintenance.off`, `reconcile`, "
            "`provisioned.reset`, `lab.force-delete`, `image.revalidate`, `image.approve`, "
            "`image.reject`."
        },
    )
    target = fields.String(
        required=True,
        metadata={"description": "What it acted on: a username, a digest, or `platform`."},
    )
    outcome = fields.String(
        required=True, metadata={"description": "`ok`, or the error code it was answered with."}
    )
    status = fields.Integer(required=True, metadata={"description": "The HTTP status."})
    detail = fields.String(required=True, metadata={"description": "What the action said."})


MAX_LIMIT = 1000
"""The most entries a listing with ``limit`` returns at once."""
DEFAULT_LIMIT = 100
"""The entries a listing returns without ``limit``."""


def _limit(what: str) -> fields.Integer:
    """A listing's ``limit`` query parameter: how many of ``what`` it returns."""
    return fields.Integer(
        load_default=DEFAULT_LIMIT,
        validate=validate.Range(min=1, max=MAX_LIMIT),
        metadata={
            "description": f"How many {what} (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})."
        },
    )


class AuditQuerySchema(Schema):
    """The audit log's query parameters."""

    limit = _limit("entries, newest first")


class FailedLabsQuerySchema(Schema):
    """The failed labs' listing's query parameters."""

    limit = _limit("labs, oldest failure first")


class MaintenanceSchema(Schema):
    """Maintenance mode: while on, new creations are refused with 503 `maintenance`."""

    enabled = fields.Boolean(required=True)
    message = fields.String(allow_none=True, required=True)
    since = unix_time("it was turned on", nullable=True)
    by = fields.String(
        allow_none=True, required=True, metadata={"description": "Who turned it on."}
    )
    detail = fields.String(metadata={"description": "What the change did."})


class MaintenanceRequestSchema(Schema):
    message = fields.String(
        required=True,
        validate=validate.Length(min=1, max=500),
        metadata={"description": "Shown to users on the spawn form and in refusals."},
    )


class ReconcileSchema(Schema):
    """A reconcile asked for now, and how it ended if it ended in time."""

    request = fields.String(required=True, metadata={"description": "The request's id."})
    finished = unix_time("the reconcile ended; null if still under way", nullable=True)
    complete = fields.Boolean(
        allow_none=True,
        required=True,
        metadata={"description": "Whether Redis was declared complete after it."},
    )
    detail = fields.String(metadata={"description": "What happened."})


class ProvisionedResetSchema(Schema):
    username = fields.String(required=True)
    was_provisioned = fields.Boolean(
        required=True, metadata={"description": "Whether the flag was set before."}
    )
    detail = fields.String(metadata={"description": "What the reset did."})


class ForceDeleteSchema(Schema):
    username = fields.String(required=True)
    status = fields.String(required=True, metadata={"description": "Always `terminating`."})
    detail = fields.String(metadata={"description": "What the force-delete did."})


class FailedLabSchema(Schema):
    """A lab whose spawn failed (or whose pod stopped for good), and since when."""

    username = fields.String(required=True)
    failed_at = unix_time("its record became failed")


class DropFailedQuerySchema(Schema):
    """The failed labs' drop's query parameters; without ``older_than_seconds`` the view
    takes the configuration's age."""

    older_than_seconds = fields.Float(
        validate=validate.Range(min=0),
        metadata={
            "description": "Drop labs that failed longer ago than this (0: every failed "
            "lab); required when `admin.dropFailedLabsAfterSeconds` is 0, its default "
            "otherwise."
        },
    )


class DroppedLabsSchema(Schema):
    """Failed labs whose deletion started."""

    older_than_seconds = fields.Float(required=True)
    dropped = fields.List(fields.Nested(FailedLabSchema), required=True)
    detail = fields.String(metadata={"description": "What the drop did."})

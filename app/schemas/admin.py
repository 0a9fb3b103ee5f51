"""Bodies of the administrators' routes."""

from __future__ import annotations

from marshmallow import Schema, fields, validate


class OperationStatusSchema(Schema):
    """An operation in progress, and which worker runs it."""

    username = fields.String(required=True)
    kind = fields.String(required=True, validate=validate.OneOf(["spawn", "delete"]))
    id = fields.String(required=True)
    started = fields.Float(required=True, metadata={"description": "Unix time."})
    deadline = fields.Float(required=True, metadata={"description": "Unix time."})
    worker = fields.String(
        allow_none=True,
        metadata={
            "description": "The worker holding the lease (host:pid:id); null while orphaned."
        },
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
    since = fields.Float(required=True, metadata={"description": "Unix time of the election."})
    expires_in = fields.Float(
        required=True,
        metadata={"description": "Seconds until the lease expires unless its holder renews it."},
    )

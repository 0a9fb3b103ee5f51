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

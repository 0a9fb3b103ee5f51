"""Bodies of the health probes."""

from __future__ import annotations

from marshmallow import Schema, fields

from app.schemas.errors import ErrorSchema


class HealthSchema(Schema):
    """``GET /healthz``."""

    status = fields.String(required=True, metadata={"description": "Always `ok`."})


class ReadySchema(Schema):
    """``GET /readyz`` when every dependency answers."""

    status = fields.String(required=True, metadata={"description": "Always `ready`."})
    checks = fields.Dict(
        keys=fields.String(),
        values=fields.String(),
        required=True,
        metadata={"description": "State of each dependency (`redis`, `kubernetes`): `ok`."},
    )


class NotReadySchema(ErrorSchema):
    """``GET /readyz`` when a dependency is down: the usual error body plus each check."""

    checks = fields.Dict(
        keys=fields.String(),
        values=fields.String(),
        required=True,
        metadata={"description": "State of each dependency: `ok` or why it failed."},
    )

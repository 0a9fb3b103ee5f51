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
        metadata={
            "description": "Each check (`redis`, `kubernetes`, `state`, `images`): `ok`. "
            "`kubernetes` only in a process that runs operations: a web process answers "
            "from Redis, and its pod's runner container checks the API server."
        },
    )
    maintenance = fields.String(
        allow_none=True,
        metadata={
            "description": "Maintenance mode's message while it is on (new creations are "
            "refused; the service is ready all the same), else null."
        },
    )


class NotReadySchema(ErrorSchema):
    """``GET /readyz`` when a dependency is down or the state is being rebuilt: the usual
    error body plus each check."""

    maintenance = fields.String(
        allow_none=True, metadata={"description": "Maintenance mode's message, else null."}
    )

    checks = fields.Dict(
        keys=fields.String(),
        values=fields.String(),
        required=True,
        metadata={
            "description": (
                "`redis` and `kubernetes`: `ok`, or `error: <kind>`; `state`: `ok` when "
                "Redis holds every workload, `rebuilding` while it is rebuilt from "
                "Kubernetes after coming back empty, `unknown` when Redis does not answer; "
                "`images`: `ok` once every image list has been read (or tried), else "
                "`unread: <names>`."
            )
        },
    )

"""The one error body every route returns."""

from __future__ import annotations

from marshmallow import Schema, fields

ERROR_SCHEMA_NAME = "Error"
"""The error body's name among the OpenAPI document's components."""


class ErrorSchema(Schema):
    """``{"code": ..., "message": ..., "field": ...}``; ``field`` only for input errors."""

    code = fields.String(required=True, metadata={"description": "Machine-readable error code."})
    message = fields.String(required=True, metadata={"description": "Human-readable explanation."})
    field = fields.String(
        metadata={"description": "Dotted path of the request field at fault, if any."}
    )


class NubladoErrorDetailSchema(Schema):
    """One problem, as nublado's controller (FastAPI) words it."""

    loc = fields.List(
        fields.String(),
        metadata={"description": "Where: `body`, `path` or `header`, then the field's path."},
    )
    msg = fields.String(required=True, metadata={"description": "Human-readable explanation."})
    type = fields.String(required=True, metadata={"description": "Machine-readable error type."})


class NubladoErrorSchema(Schema):
    """``{"detail": [{"loc": [...], "msg": ..., "type": ...}]}``: the error body of the routes
    nublado's JupyterHub spawner calls by nublado's names."""

    detail = fields.List(fields.Nested(NubladoErrorDetailSchema), required=True)

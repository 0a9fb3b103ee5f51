"""The one error body every route returns."""

from __future__ import annotations

from marshmallow import Schema, fields


class ErrorSchema(Schema):
    """``{"code": ..., "message": ..., "field": ...}``; ``field`` only for input errors."""

    code = fields.String(required=True, metadata={"description": "Machine-readable error code."})
    message = fields.String(required=True, metadata={"description": "Human-readable explanation."})
    field = fields.String(
        metadata={"description": "Dotted path of the request field at fault, if any."}
    )

"""Bodies of the image routes."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from app.images.tags import KIND_ORDER


class KnownImageSchema(Schema):
    """One image of a source."""

    reference = fields.String(required=True, metadata={"description": "`registry/repo:tag`."})
    tag = fields.String(required=True)
    name = fields.String(required=True, metadata={"description": "What users see."})
    kind = fields.String(required=True, validate=validate.OneOf([k.value for k in KIND_ORDER]))
    digest = fields.String(
        allow_none=True, metadata={"description": "`sha256:...`; null if not looked up yet."}
    )
    aliases = fields.List(
        fields.String(), required=True, metadata={"description": "Alias tags pointing here."}
    )


class ImageConfigSchema(Schema):
    """One prepull configuration's images as of its last refresh."""

    name = fields.String(required=True)
    type = fields.String(required=True, validate=validate.OneOf(["rubin", "rubin-gar", "simple"]))
    source = fields.String(
        allow_none=True, metadata={"description": "`registry/repository`; null for simple."}
    )
    refreshed = fields.String(
        allow_none=True, metadata={"description": "When the list was last read (ISO 8601)."}
    )
    stale = fields.Boolean(
        required=True, metadata={"description": "True when the list may be out of date."}
    )
    error = fields.String(allow_none=True, metadata={"description": "Why the last read failed."})
    failed = fields.String(allow_none=True, metadata={"description": "When it failed."})
    recommended = fields.Nested(KnownImageSchema, allow_none=True)
    prepull = fields.List(
        fields.Nested(KnownImageSchema),
        required=True,
        metadata={"description": "Images to prepull, the recommended one first."},
    )
    images = fields.Dict(
        keys=fields.String(validate=validate.OneOf([k.value for k in KIND_ORDER])),
        values=fields.List(fields.Nested(KnownImageSchema)),
        required=True,
        metadata={"description": "Every image by SQR-059 kind, newest first."},
    )


class ImagesSchema(Schema):
    """``GET /spawner/v1/images``."""

    configs = fields.List(fields.Nested(ImageConfigSchema), required=True)

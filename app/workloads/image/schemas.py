"""Bodies of the image routes; ``ImageRecordSchema`` is also how a digest's record is stored
(``app.workloads.image.records``)."""

from __future__ import annotations

from marshmallow import INCLUDE, RAISE, Schema, fields, validate

from app.models.image_tags import KIND_ORDER
from app.models.workload import WorkloadStatus as S
from app.models.workload import status_values
from app.workloads.image.models import ImageState


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


class WithheldImageSchema(KnownImageSchema):
    """An image not offered: its digest is not validated (or not known)."""

    state = fields.String(
        required=True,
        metadata={"description": "Its digest's state (`unknown`: its digest is not known)."},
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
    recommended_pending = fields.Nested(
        KnownImageSchema,
        allow_none=True,
        metadata={
            "description": (
                "The build the recommended tag points at now, while it is not validated: "
                "`recommended` stays the build recommended before until it passes."
            )
        },
    )
    prepull = fields.List(
        fields.Nested(KnownImageSchema),
        required=True,
        metadata={"description": "Images to prepull, the recommended one first."},
    )
    withheld = fields.List(
        fields.Nested(WithheldImageSchema),
        required=True,
        metadata={"description": "Images with a known digest the source lists but does not offer."},
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


class PrepullFailureSchema(Schema):
    node = fields.String(required=True)
    reason = fields.String(required=True, metadata={"description": "Why the pull failed."})
    attempts = fields.Integer(required=True, metadata={"description": "Failures in a row."})
    retry = fields.String(required=True, metadata={"description": "Next try (ISO 8601)."})


class PrepullImageSchema(Schema):
    """An image of a prepull configuration and where it is cached."""

    url = fields.String(required=True, metadata={"description": "The image reference."})
    name = fields.String(required=True)
    hash = fields.String(allow_none=True, metadata={"description": "Its digest."})
    nodes = fields.List(fields.String(), metadata={"description": "Eligible nodes that have it."})
    missing = fields.List(
        fields.String(), metadata={"description": "Eligible nodes that lack it (pending only)."}
    )
    pulling = fields.List(
        fields.String(), metadata={"description": "Nodes pulling it right now (pending only)."}
    )
    failures = fields.List(
        fields.Nested(PrepullFailureSchema),
        metadata={"description": "Pulls that failed, retried later (pending only)."},
    )


class OtherImageSchema(Schema):
    """An image of the configuration's source that is not prepulled."""

    url = fields.String(required=True, metadata={"description": "The image reference."})
    name = fields.String(required=True)


class PrepullImagesSchema(Schema):
    prepulled = fields.List(fields.Nested(PrepullImageSchema), required=True)
    pending = fields.List(fields.Nested(PrepullImageSchema), required=True)
    other = fields.List(fields.Nested(OtherImageSchema), required=True)


class PrepullConfigStatusSchema(Schema):
    """A prepull configuration as configured (camelCase, as in DMTN-222), plus ``images``."""

    class Meta:
        unknown = INCLUDE

    name = fields.String(required=True)
    type = fields.String(required=True)
    registry = fields.String()
    docker = fields.Dict()
    gar = fields.Dict()
    recommendedTag = fields.String()  # noqa: N815 (DMTN-222's key)
    numReleases = fields.Integer()  # noqa: N815
    numWeeklies = fields.Integer()  # noqa: N815
    numDailies = fields.Integer()  # noqa: N815
    cycle = fields.Integer()
    aliasTags = fields.List(fields.String())  # noqa: N815
    groups = fields.List(fields.String())
    images = fields.Nested(PrepullImagesSchema, required=True)


class PrepullNodeSchema(Schema):
    name = fields.String(required=True)
    eligible = fields.Boolean(required=True)
    comment = fields.String(metadata={"description": "Why the node is ineligible."})
    cached = fields.List(fields.String(), required=True, metadata={"description": "Images."})


class PrepullStatusSchema(Schema):
    """``GET /spawner/v1/prepulls`` (DMTN-222's shape)."""

    updated = fields.String(
        allow_none=True, metadata={"description": "When the prepuller last looked (ISO 8601)."}
    )
    configs = fields.List(fields.Nested(PrepullConfigStatusSchema), required=True)
    nodes = fields.List(fields.Nested(PrepullNodeSchema), required=True)


class TransitionSchema(Schema):
    state = fields.String(required=True)
    at = fields.String(required=True)
    by = fields.String(required=True)
    why = fields.String(required=True)


class ValidationResultSchema(Schema):
    passed = fields.Boolean(required=True)
    nodes = fields.List(fields.String(), required=True)
    seconds = fields.Float(required=True)
    reason = fields.String(required=True, metadata={"description": "Why it failed."})
    exit_code = fields.Integer(allow_none=True)
    log_tail = fields.List(
        fields.String(), required=True, metadata={"description": "The failing pod's last lines."}
    )


class ImageRecordSchema(Schema):
    """A digest on its way into service: its state, and how it got there."""

    digest = fields.String(required=True)
    source = fields.String(required=True, metadata={"description": "The prepull block."})
    references = fields.List(fields.String(), required=True)
    state = fields.String(
        required=True,
        validate=validate.OneOf([s.value for s in ImageState]),
        metadata={"description": "discovered, pulling, validating, validated, rejected, ..."},
    )
    history = fields.List(fields.Nested(TransitionSchema), required=True)
    validation = fields.Nested(ValidationResultSchema, allow_none=True)
    status = fields.String(
        load_default=S.RUNNING.value,
        validate=validate.OneOf(status_values(S.RUNNING, S.TERMINATING)),
    )


def image_record_body(*, many: bool = False) -> ImageRecordSchema:
    """A record as the routes serve it: less the engine's ``status``, which is the service's
    own (``state`` says as much: ``deleting`` while it is ``terminating``)."""
    return ImageRecordSchema(many=many, exclude=["status"])


class DecisionSchema(Schema):
    """An administrator's decision about a digest, and why (kept in its history)."""

    class Meta:
        unknown = RAISE

    reason = fields.String(required=True, validate=validate.Length(min=1, max=500))

"""Routes about lab images: what each source offers (and, with the prepuller, where)."""

from __future__ import annotations

import json
from typing import Any

from app.extensions import labs_ext
from app.models.image_record import image_json
from app.schemas.images import ImageRecordSchema, ImagesSchema, PrepullStatusSchema
from app.services.auth import ADMIN
from app.services.image_lifecycle import ImageLifecycle
from app.services.prepuller import prepull_report
from app.web.api import ApiBlueprint
from app.web.auth import requires

prepull = ApiBlueprint("prepull", __name__, url_prefix="/spawner/v1")


@prepull.get("/images")
@prepull.response(200, ImagesSchema)
@requires(ADMIN)
def list_images() -> dict[str, Any]:
    """The images known, by kind, with digests, and which one is recommended."""
    return {"configs": labs_ext.context.images.catalog()}


@prepull.get("/images/records")
@prepull.response(200, ImageRecordSchema(many=True))
@requires(ADMIN)
def image_records() -> list[dict[str, Any]]:
    """Every digest the sources listed, with its state on the way into service (only
    ``validated`` ones are offered), its history and its last validation."""
    ctx = labs_ext.context
    lifecycle = ImageLifecycle(ctx.config, ctx.labs.workloads, ctx.image_store, None)
    found = sorted(lifecycle.records().values(), key=lambda r: (r.source, r.digest))
    return [json.loads(image_json(record)) for record in found]


@prepull.get("/prepulls")
@prepull.response(200, PrepullStatusSchema)
@requires(ADMIN)
def prepull_status() -> dict[str, Any]:
    """Each prepull configuration's images (prepulled, pending with the nodes that lack
    them, other) and every node with its eligibility and cached images."""
    ctx = labs_ext.context
    return prepull_report(ctx.images, ctx.prepulls)

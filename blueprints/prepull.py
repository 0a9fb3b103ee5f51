"""Routes about lab images: what each source offers (and, with the prepuller, where)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.extensions import labs_ext
from app.openapi import documented
from app.schemas.images import ImagesSchema, PrepullStatusSchema
from app.services.auth import ADMIN
from app.services.prepuller import prepull_report
from app.web.auth import requires

prepull = Blueprint("prepull", __name__, url_prefix="/spawner/v1")

_images_schema = ImagesSchema()
_prepulls_schema = PrepullStatusSchema()


@prepull.get("/images")
@documented(responses={200: ImagesSchema})
@requires(ADMIN)
def list_images() -> Response:
    """The images known, by kind, with digests, and which one is recommended."""
    configs = labs_ext.context.images.catalog()
    return jsonify(_images_schema.dump({"configs": configs}))


@prepull.get("/prepulls")
@documented(responses={200: PrepullStatusSchema})
@requires(ADMIN)
def prepull_status() -> Response:
    """Each prepull configuration's images (prepulled, pending with the nodes that lack
    them, other) and every node with its eligibility and cached images."""
    ctx = labs_ext.context
    return jsonify(_prepulls_schema.dump(prepull_report(ctx.images, ctx.prepulls)))

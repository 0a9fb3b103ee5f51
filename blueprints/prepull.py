"""Routes about lab images: what each source offers (and, with the prepuller, where)."""

from __future__ import annotations

from typing import Any

from app.errors import ConflictError, InvalidRequestError, NotFoundError
from app.extensions import labs_ext
from app.services.auth import ADMIN
from app.web.api import ApiBlueprint, raises
from app.workloads.image.lifecycle import ImageLifecycle
from app.workloads.image.models import ImageRecord, ImageState
from app.workloads.image.prepuller import prepull_report
from app.workloads.image.schemas import (
    DecisionSchema,
    ImagesSchema,
    PrepullStatusSchema,
    image_record_body,
)
from blueprints.support.audit import audited
from blueprints.support.auth import current_user, requires

prepull = ApiBlueprint("prepull", __name__, url_prefix="/spawner/v1")

_decision = DecisionSchema()


@prepull.get("/images")
@prepull.response(200, ImagesSchema)
@requires(ADMIN)
def list_images() -> dict[str, Any]:
    """The images known, by kind, with digests, and which one is recommended."""
    return {"configs": labs_ext.context.images.catalog()}


@prepull.get("/images/records")
@prepull.response(200, image_record_body(many=True))
@requires(ADMIN)
def image_records() -> list[ImageRecord]:
    """Every digest the sources listed, with its state on the way into service (only
    ``validated`` ones are offered), its history and its last validation."""
    return sorted(_lifecycle().records().values(), key=lambda r: (r.source, r.digest))


def _lifecycle() -> ImageLifecycle:
    ctx = labs_ext.context
    return ImageLifecycle(ctx.config, labs_ext.engine.workloads, ctx.image_store, labs_ext.engine)


@prepull.get("/images/records/<digest>")
@prepull.response(200, image_record_body())
@raises(NotFoundError)
@requires(ADMIN)
def image_record(digest: str) -> ImageRecord:
    """One digest's record."""
    return _lifecycle().record(digest)


@prepull.post("/images/records/<digest>/revalidate")
@prepull.response(202, image_record_body(), description="The digest, discovered again.")
@raises(NotFoundError, ConflictError)
@requires(ADMIN, with_user=True)
@audited("image.revalidate", status=202, target="digest")
def revalidate_image(digest: str) -> tuple[ImageRecord, int]:
    """Validate the digest again; it is not offered until it passes."""
    return _lifecycle().revalidate(digest, by=current_user().username), 202


@prepull.post("/images/records/<digest>/approve")
@prepull.response(200, image_record_body())
@raises(InvalidRequestError, NotFoundError, ConflictError)
@requires(ADMIN, with_user=True)
@audited("image.approve", target="digest")
@prepull.arguments(_decision)
def approve_image(body: dict[str, Any], digest: str) -> ImageRecord:
    """Validate the digest by hand: it is offered at once. Recorded with the caller's name."""
    return _decided(digest, ImageState.VALIDATED, "approved", body["reason"])


@prepull.post("/images/records/<digest>/reject")
@prepull.response(200, image_record_body())
@raises(InvalidRequestError, NotFoundError, ConflictError)
@requires(ADMIN, with_user=True)
@audited("image.reject", target="digest")
@prepull.arguments(_decision)
def reject_image(body: dict[str, Any], digest: str) -> ImageRecord:
    """Reject the digest by hand: it is no longer offered. Recorded with the caller's name."""
    return _decided(digest, ImageState.REJECTED, "rejected", body["reason"])


def _decided(digest: str, state: ImageState, verb: str, why: str) -> ImageRecord:
    """The record once the caller's decision, with their reason, is in its history."""
    by = current_user().username
    return _lifecycle().decide(digest, state, by=by, why=f"{verb}: {why}")


@prepull.get("/prepulls")
@prepull.response(200, PrepullStatusSchema)
@requires(ADMIN)
def prepull_status() -> dict[str, Any]:
    """Each prepull configuration's images (prepulled, pending with the nodes that lack
    them, other) and every node with its eligibility and cached images."""
    ctx = labs_ext.context
    return prepull_report(ctx.images, ctx.prepulls)

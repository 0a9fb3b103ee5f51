"""Users' remote kernels: start one beside the lab, list, read and delete them."""

from __future__ import annotations

from typing import Any

from flask import request

from app.errors import (
    BUDGETED_CREATION_ERRORS,
    InvalidRequestError,
    NotFoundError,
    TooManyRequestsError,
)
from app.extensions import labs_ext, limits_ext
from app.services.auth import ADMIN, OWNER
from app.web.api import ApiBlueprint, raises
from app.workloads.kernel.kind import DEFAULT_GRACE_SECONDS
from app.workloads.kernel.models import KernelRecord
from app.workloads.kernel.schemas import KernelRequestSchema, KernelSchema
from app.workloads.kernel.service import KernelRequest, KernelService
from blueprints.support.auth import current_caller, current_user, requires
from blueprints.support.beside_lab import BesideLabReads, add_beside_lab_reads

kernels = ApiBlueprint("kernels", __name__, url_prefix="/spawner/v1")

MAX_GRACE_SECONDS = 300


def _service() -> KernelService:
    return KernelService(labs_ext.context, labs_ext.engine)


@kernels.post("/labs/<username>/kernels")
@kernels.response(201, KernelSchema, description="The kernel, starting.")
@raises(*BUDGETED_CREATION_ERRORS)
@requires(OWNER, ADMIN, with_user=True)
@kernels.arguments(KernelRequestSchema())
def create_kernel(body: dict[str, Any], username: str) -> tuple[KernelRecord, int]:
    """Start a kernel in the user's lab namespace, within their budget; the connection key
    goes to the kernel's Secret only."""
    with limits_ext.limits.change(current_caller(), "kernel"):
        connection = body.pop("connection")
        kernel = KernelRequest(key=connection["key"], **body)
        return _service().create(username, current_user(), kernel), 201


@kernels.delete("/labs/<username>/kernels/<kernel_id>")
@kernels.response(202, KernelSchema, description="The kernel, terminating.")
@kernels.doc(
    parameters=[
        {
            "in": "query",
            "name": "grace_seconds",
            "description": "Seconds the kernel is given to stop (default "
            f"{DEFAULT_GRACE_SECONDS}).",
            "schema": {"type": "integer", "minimum": 0, "maximum": MAX_GRACE_SECONDS},
        }
    ]
)
@raises(InvalidRequestError, NotFoundError, TooManyRequestsError)
@requires(OWNER, ADMIN)
def delete_kernel(username: str, kernel_id: str) -> tuple[KernelRecord, int]:
    """Start deleting the kernel, its pod given `grace_seconds` to stop; 202, or 404."""
    with limits_ext.limits.change(current_caller(), "kernel"):
        grace = _grace_seconds(request.args.get("grace_seconds"))
        return _service().delete(username, kernel_id, grace_seconds=grace), 202


def _grace_seconds(value: str | None) -> int:
    if value is None:
        return DEFAULT_GRACE_SECONDS
    if not value.isdigit() or int(value) > MAX_GRACE_SECONDS:
        raise InvalidRequestError(
            f"grace_seconds must be a whole number from 0 to {MAX_GRACE_SECONDS}",
            field="grace_seconds",
        )
    return int(value)


add_beside_lab_reads(
    kernels,
    BesideLabReads(
        plural="kernels",
        noun="kernel",
        key="kernel_id",
        schema=KernelSchema,
        service=_service,
        listed_doc="The user's kernels, oldest first.",
        operations="start or deletion",
        first_event="Kernel 0b6c6a1e requested",
    ),
)

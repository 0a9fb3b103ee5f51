"""Users' remote kernels: start one beside the lab, list, read and delete them."""

from __future__ import annotations

from typing import Any

from app.errors import (
    BUDGETED_CREATION_ERRORS,
    NotFoundError,
    TooManyRequestsError,
)
from app.extensions import labs_ext, limits_ext
from app.services.auth import ADMIN, OWNER
from app.web.api import ApiBlueprint, raises
from app.workloads.kernel.models import KernelRecord
from app.workloads.kernel.schemas import (
    KernelDeleteQuerySchema,
    KernelRequestSchema,
    KernelSchema,
)
from app.workloads.kernel.service import KernelRequest, KernelService
from blueprints.support.auth import current_caller, current_user, requires
from blueprints.support.beside_lab import BesideLabReads, add_beside_lab_reads

kernels = ApiBlueprint("kernels", __name__, url_prefix="/spawner/v1")


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
@raises(NotFoundError, TooManyRequestsError)
@requires(OWNER, ADMIN)
@kernels.arguments(KernelDeleteQuerySchema(), location="query")
def delete_kernel(query: dict[str, Any], username: str, kernel_id: str) -> tuple[KernelRecord, int]:
    """Start deleting the kernel, its pod given `grace_seconds` to stop; 202, or 404."""
    with limits_ext.limits.change(current_caller(), "kernel"):
        grace = query["grace_seconds"]
        return _service().delete(username, kernel_id, grace_seconds=grace), 202


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

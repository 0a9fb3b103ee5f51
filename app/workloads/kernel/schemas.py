"""Request and response bodies of the remote kernel routes; ``KernelSchema`` is also how a
kernel's record is stored (``app.workloads.kernel.records``)."""

from __future__ import annotations

from typing import Any

from marshmallow import RAISE, Schema, fields, validate, validates_schema

from app.models.workload import WorkloadStatus as S
from app.schemas.records import error_field, status_field, usage_field
from app.schemas.requests import ENV_NAME, check_env_size, lab_image_field
from app.workloads.kernel.models import DEFAULT_GRACE_SECONDS, KERNEL_PORTS

KEY_PATTERN = r"^[0-9a-f]{32,128}$"
"""16 to 64 random bytes in lowercase hex, as the kernel's start-up accepts them."""
KERNEL_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"
"""A kernel id names its pod (``kernel-<id>``): lowercase letters, digits and '-'
(Jupyter's uuid4 ids fit)."""
MAX_ENV_VARIABLES = 64
MAX_ENV_JSON_BYTES = 16 * 1024
"""Bounds on a kernel's ``env``, which goes into its pod's spec."""
MAX_GRACE_SECONDS = 300
"""The longest a deleted kernel's pod is given to stop."""


class ConnectionSchema(Schema):
    """How the Jupyter server will talk to the kernel."""

    class Meta:
        unknown = RAISE

    transport = fields.String(load_default="tcp", validate=validate.OneOf(["tcp"]))
    signature_scheme = fields.String(
        load_default="hmac-sha256", validate=validate.OneOf(["hmac-sha256"])
    )
    key = fields.String(
        required=True,
        load_only=True,
        validate=validate.Regexp(KEY_PATTERN, error="must be 32 to 128 lowercase hex digits"),
        metadata={"description": "The HMAC key; kept in the kernel's Secret only."},
    )


class KernelRequestSchema(Schema):
    """``POST /spawner/v1/labs/<username>/kernels``: the kernel to start."""

    class Meta:
        unknown = RAISE

    size = fields.String(
        required=True,
        metadata={"description": "A lab size the user may spawn, or a hardware tier."},
    )
    image = lab_image_field()
    env = fields.Dict(
        keys=fields.String(validate=ENV_NAME),
        values=fields.String(),
        load_default=dict,
        metadata={
            "description": (
                f"The kernel's environment: at most {MAX_ENV_VARIABLES} variables and "
                f"{MAX_ENV_JSON_BYTES} bytes as JSON. As a lab's: names the platform sets "
                "(its variables, `KERNEL_*`, `POD_IP`) are overridden, names that change how "
                "processes start are dropped, and the kernel's events say which."
            )
        },
    )
    connection = fields.Nested(ConnectionSchema, required=True)
    kernel_id = fields.String(
        load_default=None,
        validate=validate.Regexp(KERNEL_ID_PATTERN, error="must be a kernel id (see pattern)"),
        metadata={"description": "The id to give it (a restart keeps its id); default a uuid4."},
    )

    @validates_schema
    def _bounded_env(self, data: dict[str, Any], **_: Any) -> None:
        check_env_size(
            data.get("env") or {}, variables=MAX_ENV_VARIABLES, json_bytes=MAX_ENV_JSON_BYTES
        )


_GRACE_SECONDS_ERROR = f"must be a whole number from 0 to {MAX_GRACE_SECONDS}"


class KernelDeleteQuerySchema(Schema):
    """``DELETE /spawner/v1/labs/<username>/kernels/<kernel_id>``: how long the kernel has."""

    grace_seconds = fields.Integer(
        load_default=DEFAULT_GRACE_SECONDS,
        validate=validate.Range(min=0, max=MAX_GRACE_SECONDS, error=_GRACE_SECONDS_ERROR),
        error_messages={"invalid": _GRACE_SECONDS_ERROR},
        metadata={
            "description": f"Seconds the kernel is given to stop (default {DEFAULT_GRACE_SECONDS})."
        },
    )


class PortsSchema(Schema):
    shell = fields.Integer(required=True)
    iopub = fields.Integer(required=True)
    stdin = fields.Integer(required=True)
    control = fields.Integer(required=True)
    hb = fields.Integer(required=True)


class KernelSchema(Schema):
    """A remote kernel, as the service records it (never its key)."""

    kernel_id = fields.String(required=True)
    owner = fields.String(required=True)
    namespace = fields.String(required=True, metadata={"description": "The lab's namespace."})
    status = status_field(S.STARTING, S.RUNNING, S.EXITED, S.FAILED, S.TERMINATING)
    size = fields.String(required=True)
    image = fields.String(required=True)
    created = fields.String(required=True, metadata={"description": "When it was asked for."})
    usage = usage_field()
    ip = fields.String(
        allow_none=True, metadata={"description": "The pod's address, once running."}
    )
    ports = fields.Nested(
        PortsSchema,
        required=True,
        metadata={"description": f"The kernel's ports on `ip`: {KERNEL_PORTS}."},
    )
    exit_code = fields.Integer(allow_none=True, metadata={"description": "Once it exited."})
    error = error_field()

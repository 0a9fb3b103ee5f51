"""Request and response bodies of the lab routes."""

from __future__ import annotations

from marshmallow import RAISE, Schema, fields, validate

_ENV_NAME = validate.Regexp(
    r"^[A-Za-z_][A-Za-z0-9_]*$", error="must be an environment variable name"
)


class LabOptionsSchema(Schema):
    """The spawn form's fields; unknown keys are rejected so nothing slips into the pod."""

    class Meta:
        unknown = RAISE

    image = fields.String(required=True, metadata={"description": "Image reference to run."})
    size = fields.String(required=True, metadata={"description": "Name of a lab size."})
    debug = fields.Boolean(load_default=False, metadata={"description": "Verbose lab start-up."})
    reset_user_env = fields.Boolean(
        load_default=False, metadata={"description": "Move the user's environment aside."}
    )


class SpawnRequestSchema(Schema):
    """``POST /spawner/v1/labs/<username>/spawn``."""

    class Meta:
        unknown = RAISE

    options = fields.Nested(LabOptionsSchema, required=True)
    env = fields.Dict(
        keys=fields.String(validate=_ENV_NAME),
        values=fields.String(),
        load_default=dict,
        metadata={"description": "Environment from JupyterHub (lowest precedence)."},
    )


class GroupSchema(Schema):
    """One of the user's groups, as Gafaelfawr reports it."""

    name = fields.String(required=True)
    id = fields.Integer(allow_none=True, metadata={"description": "GID; null if none."})


class QuotaValuesSchema(Schema):
    """CPU and memory of a limit or a request."""

    cpu = fields.Float(required=True, metadata={"description": "CPU cores."})
    memory = fields.Integer(required=True, metadata={"description": "Bytes."})


class QuotasSchema(Schema):
    """The lab's resources: the hard limits and what is reserved on the node."""

    limits = fields.Nested(QuotaValuesSchema, required=True)
    requests = fields.Nested(QuotaValuesSchema, required=True)


class LabStatusSchema(Schema):
    """A lab's status, as DMTN-222 describes it, plus ``internal_url`` and ``error``."""

    username = fields.String(required=True, metadata={"description": "The lab's user."})
    status = fields.String(
        required=True,
        validate=validate.OneOf(["starting", "running", "terminating", "failed"]),
        metadata={"description": "Where the lab is in its life."},
    )
    pod = fields.String(
        required=True,
        validate=validate.OneOf(["present", "missing"]),
        metadata={"description": "Whether the lab's pod exists in Kubernetes."},
    )
    options = fields.Nested(
        LabOptionsSchema, required=True, metadata={"description": "The spawn form's choices."}
    )
    env = fields.Dict(
        keys=fields.String(),
        values=fields.String(),
        required=True,
        metadata={"description": "Environment from the spawn request, without credentials."},
    )
    uid = fields.Integer(allow_none=True, metadata={"description": "The lab runs as this UID."})
    gid = fields.Integer(allow_none=True, metadata={"description": "Primary GID of the lab."})
    groups = fields.List(
        fields.Nested(GroupSchema), required=True, metadata={"description": "The user's groups."}
    )
    quotas = fields.Nested(QuotasSchema, required=True)
    internal_url = fields.String(
        allow_none=True, metadata={"description": "Where JupyterHub reaches the running lab."}
    )
    error = fields.String(allow_none=True, metadata={"description": "Why the lab failed."})


class DeleteAcceptedSchema(Schema):
    """``DELETE /spawner/v1/labs/<username>``: the deletion has started."""

    username = fields.String(required=True)
    status = fields.String(required=True, metadata={"description": "Always `terminating`."})

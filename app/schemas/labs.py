"""Request and response bodies of the lab routes."""

from __future__ import annotations

import json
from typing import Any

from marshmallow import (
    RAISE,
    Schema,
    ValidationError,
    fields,
    post_load,
    validate,
    validates_schema,
)

from app.models.images import ImageChoice, ImageClass
from app.models.lab import LabApi, SpawnChoices
from app.models.workload import WorkloadStatus as S
from app.models.workload import status_values

_ENV_NAME = validate.Regexp(
    r"^[A-Za-z_][A-Za-z0-9_]*$", error="must be an environment variable name"
)

MAX_ENV_VARIABLES = 256
MAX_ENV_NAME_LENGTH = 128
MAX_ENV_JSON_BYTES = 64 * 1024
"""Bounds on a spawn request's ``env``. It goes into the lab's env ConfigMap (its
credentials into the lab Secret), which Kubernetes refuses above 1 MiB, and, as JSON, into
the lab's spec annotation on its namespace and pod, where Kubernetes allows 256 KiB of
annotations in all. Measured as that JSON (escapes included, so no choice of characters can
inflate it), the request's share stays at a quarter of the tightest limit, whatever the
platform adds: a spawn never fails late, after objects were created, on an env too big."""


class LabOptionsSchema(Schema):
    """The spawn form's fields; unknown keys are rejected so nothing slips into the pod."""

    class Meta:
        unknown = RAISE

    image = fields.String(
        required=True, metadata={"description": "Image reference run (without digest)."}
    )
    size = fields.String(required=True, metadata={"description": "Name of a lab size."})
    debug = fields.Boolean(load_default=False, metadata={"description": "Verbose lab start-up."})
    reset_user_env = fields.Boolean(
        load_default=False, metadata={"description": "Move the user's environment aside."}
    )
    unvalidated_image = fields.Boolean(
        load_default=False,
        metadata={"description": "An administrator ran an image that is not validated."},
    )


class SingleValue(fields.Field):
    """A form value: JSON, or as JupyterHub submits forms, a list holding one string.

    HTML forms can repeat a field; every field of the spawn form is single-valued, so a list
    of any other length is an error rather than a guess at which value was meant.
    """

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if isinstance(value, list):
            if len(value) != 1:
                raise ValidationError(f"must be a single value, not {len(value)} values")
            value = value[0]
        return self._convert(value)

    def _convert(self, value: Any) -> Any:
        return value


class FormString(SingleValue):
    def _convert(self, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise ValidationError("must be a non-empty string")
        if len(value) > 512:
            raise ValidationError("is longer than 512 characters")
        return value


class FormBoolean(SingleValue):
    """``true``/``false`` as JSON booleans or as the strings a form submits."""

    def _convert(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValidationError("must be true or false")


USE_DROPDOWN = "use_image_from_dropdown"
"""The ``image_list`` radio value that means "the image picked in ``image_dropdown``"."""


class SpawnOptionsSchema(Schema):
    """The spawn form's fields. Choose the image in exactly one way: ``image`` (a reference),
    ``image_list`` (a radio button; ``use_image_from_dropdown`` defers to ``image_dropdown``),
    ``image_dropdown`` alone, or ``image_class``. Unknown keys are rejected, so nothing
    unexpected reaches a pod."""

    class Meta:
        unknown = RAISE

    image = FormString(metadata={"description": "Image reference (`registry/repo:tag`)."})
    image_list = FormString(
        metadata={"description": f"Radio choice: a reference, or `{USE_DROPDOWN}`."}
    )
    image_dropdown = FormString(metadata={"description": "Dropdown choice: a reference."})
    image_class = FormString(
        validate=validate.OneOf([c.value for c in ImageClass]),
        metadata={"description": "Current image of a class instead of a reference."},
    )
    image_tag = FormString(
        metadata={
            "description": (
                "A tag of the images on offer (`w_2024_42`), as nublado's bots choose; the "
                "first source offering it wins."
            )
        }
    )
    size = FormString(required=True, metadata={"description": "Name of a lab size."})
    debug = FormBoolean(metadata={"description": "Verbose lab start-up."})
    enable_debug = FormBoolean(metadata={"description": "nublado's name of `debug`."})
    reset_user_env = FormBoolean(
        load_default=False, metadata={"description": "Move the user's environment aside."}
    )
    unvalidated_image = FormBoolean(
        load_default=False,
        metadata={
            "description": (
                "Administrators only: run the named image even though it is not validated "
                "(recorded on the lab)."
            )
        },
    )

    @validates_schema
    def _one_image(self, data: dict[str, Any], **_: Any) -> None:
        if "debug" in data and "enable_debug" in data:
            raise ValidationError("give debug or enable_debug, not both", "enable_debug")
        ways: list[str] = [k for k in ("image", "image_class", "image_tag") if k in data]
        if "image_list" in data or "image_dropdown" in data:
            ways.append("image_list")
        if len(ways) > 1:
            raise ValidationError(
                f"choose the image one way only, not by {' and '.join(ways)}", ways[-1]
            )
        if not ways:
            raise ValidationError(
                "choose an image (image, image_list, image_class or image_tag)", "image"
            )
        if data.get("image_list") == USE_DROPDOWN and "image_dropdown" not in data:
            raise ValidationError(f"required when image_list is {USE_DROPDOWN}", "image_dropdown")

    @post_load
    def _choices(self, data: dict[str, Any], **_: Any) -> SpawnChoices:
        if "image_class" in data:
            choice = ImageChoice(
                image_class=ImageClass(data["image_class"]), field="options.image_class"
            )
        elif "image_tag" in data:
            choice = ImageChoice(tag=data["image_tag"], field="options.image_tag")
        elif "image" in data:
            choice = ImageChoice(reference=data["image"], field="options.image")
        elif data.get("image_list", USE_DROPDOWN) != USE_DROPDOWN:
            choice = ImageChoice(reference=data["image_list"], field="options.image_list")
        else:
            choice = ImageChoice(reference=data["image_dropdown"], field="options.image_dropdown")
        return SpawnChoices(
            image=choice,
            size=data["size"],
            debug=data.get("debug", data.get("enable_debug", False)),
            reset_user_env=data["reset_user_env"],
            unvalidated_image=data["unvalidated_image"],
        )


class SpawnRequestSchema(Schema):
    """``POST /spawner/v1/labs/<username>/spawn``."""

    class Meta:
        unknown = RAISE

    options = fields.Nested(SpawnOptionsSchema, required=True)
    env = fields.Dict(
        keys=fields.String(validate=[validate.Length(max=MAX_ENV_NAME_LENGTH), _ENV_NAME]),
        values=fields.String(),
        load_default=dict,
        metadata={
            "description": (
                "Environment from JupyterHub (lowest precedence): at most "
                f"{MAX_ENV_VARIABLES} variables, names of at most {MAX_ENV_NAME_LENGTH} "
                f"characters, {MAX_ENV_JSON_BYTES} bytes in all as JSON. JupyterHub's "
                "`Spawner.get_env()` as it is: names the platform sets are overridden, names "
                "that change how the lab starts are dropped, and the spawn's events say which."
            )
        },
    )

    @validates_schema
    def _bounded_env(self, data: dict[str, Any], **_: Any) -> None:
        env: dict[str, str] = data.get("env") or {}
        if len(env) > MAX_ENV_VARIABLES:
            raise ValidationError(
                f"at most {MAX_ENV_VARIABLES} variables ({len(env)} given)", "env"
            )
        size = len(json.dumps(env))
        if size > MAX_ENV_JSON_BYTES:
            raise ValidationError(
                f"at most {MAX_ENV_JSON_BYTES} bytes in all as JSON ({size} given)", "env"
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
        validate=validate.OneOf(status_values(S.STARTING, S.RUNNING, S.TERMINATING, S.FAILED)),
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
    api = fields.String(
        validate=validate.OneOf([api.value for api in LabApi]),
        metadata={
            "description": (
                "The API that created the lab: `dmtn-222` (`POST .../spawn`) or `nublado` "
                "(`POST .../create`). It decides how the lab's events read and how its "
                "`DELETE` answers."
            )
        },
    )


class DeleteAcceptedSchema(Schema):
    """``DELETE /spawner/v1/labs/<username>``: the deletion has started."""

    username = fields.String(required=True)
    status = fields.String(required=True, metadata={"description": "Always `terminating`."})

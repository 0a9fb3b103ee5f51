"""Request and response bodies of the apps routes; ``AppRecordSchema`` is also how an app's
record is stored (``app.workloads.app.records``), and its body adds where its pages are."""

from __future__ import annotations

from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

from app.models.identity import GROUP_NAME_PATTERN
from app.models.workload import WorkloadStatus as S
from app.schemas.records import status_field
from app.schemas.requests import ENV_NAME, check_env_size
from app.workloads.app.config import PRESET_VARIABLES
from app.workloads.app.models import AppPhase, AppScope

MAX_ENV_VARIABLES = 64
MAX_ENV_JSON_BYTES = 16 * 1024
"""Bounds on an app's ``env``, which goes into its Deployment."""
MAX_LOG_LINES = 5000
"""The most lines ``logs`` returns (``tail``)."""
DEFAULT_LOG_LINES = 100
"""The lines ``logs`` returns without ``tail``."""

_SCOPES = [scope.value for scope in AppScope]


def _check_env(env: dict[str, str]) -> None:
    preset = sorted(name for name in env if name in PRESET_VARIABLES)
    if preset:
        raise ValidationError(f"set by the service: {', '.join(preset)}", "env")
    kubernetes = sorted(name for name in env if name.startswith("KUBERNETES_"))
    if kubernetes:
        raise ValidationError(f"set by Kubernetes: {', '.join(kubernetes)}", "env")
    check_env_size(env, variables=MAX_ENV_VARIABLES, json_bytes=MAX_ENV_JSON_BYTES)


def _env_field(required_note: str) -> fields.Dict:
    return fields.Dict(
        keys=fields.String(validate=ENV_NAME),
        values=fields.String(validate=validate.Length(max=8192)),
        load_default=None,
        metadata={
            "description": (
                f"The app's variables{required_note}: at most {MAX_ENV_VARIABLES}, "
                f"{MAX_ENV_JSON_BYTES} bytes as JSON; not {', '.join(PRESET_VARIABLES)}, "
                "which the service sets."
            )
        },
    )


class AppRequestSchema(Schema):
    """``POST /spawner/v1/apps``: an app to make from a template."""

    class Meta:
        unknown = RAISE

    template = fields.String(required=True, metadata={"description": "A template's name."})
    group = fields.String(
        required=True,
        validate=[
            validate.Length(min=1, max=256),
            validate.Regexp(GROUP_NAME_PATTERN, error="must be a group's name"),
        ],
        metadata={"description": "The group that owns the app; the caller must be in it."},
    )
    name = fields.String(
        required=True,
        validate=validate.Length(min=1, max=128),
        metadata={"description": "What the group calls the app."},
    )
    env = _env_field(" (the template's required ones among them)")
    size = fields.String(
        required=True, metadata={"description": "A lab size, or a hardware tier (for GPUs)."}
    )
    scope = fields.String(
        load_default=AppScope.GROUP.value,
        validate=validate.OneOf(_SCOPES),
        metadata={"description": "Who reaches its pages: public, platform or group."},
    )

    @validates_schema
    def _bounded_env(self, data: dict[str, Any], **_: Any) -> None:
        _check_env(data.get("env") or {})


class AppChangeSchema(Schema):
    """``PATCH /spawner/v1/apps/<id>``: what changes (not its template, group or id)."""

    class Meta:
        unknown = RAISE

    env = _env_field(", all of them (it replaces the app's)")
    size = fields.String(
        load_default=None, metadata={"description": "A lab size, or a hardware tier."}
    )
    scope = fields.String(load_default=None, validate=validate.OneOf(_SCOPES))

    @validates_schema
    def _something(self, data: dict[str, Any], **_: Any) -> None:
        if all(data.get(key) is None for key in ("env", "size", "scope")):
            raise ValidationError("give env, size or scope", "_schema")
        if data.get("env") is not None:
            _check_env(data["env"])


class AppListQuerySchema(Schema):
    """The apps' listing's query parameters."""

    group = fields.String(
        validate=validate.Regexp(GROUP_NAME_PATTERN, error="must be a group's name"),
        metadata={"description": "Only this group's apps (default: every group of the caller)."},
    )


class LogsQuerySchema(Schema):
    """An app's log's query parameters."""

    tail = fields.Integer(
        load_default=DEFAULT_LOG_LINES,
        validate=validate.Range(min=1, max=MAX_LOG_LINES),
        metadata={
            "description": f"How many of the last lines (default {DEFAULT_LOG_LINES}, at most "
            f"{MAX_LOG_LINES})."
        },
    )


class AppRecordSchema(Schema):
    """A group's app as the service records it (``app.workloads.app.records``)."""

    id = fields.String(required=True, metadata={"description": "Its id, in its URL."})
    group = fields.String(required=True)
    template = fields.String(required=True)
    template_version = fields.String(required=True)
    name = fields.String(required=True)
    scope = fields.String(required=True, validate=validate.OneOf(_SCOPES))
    size = fields.String(required=True)
    env = fields.Dict(
        keys=fields.String(),
        values=fields.String(),
        required=True,
        metadata={"description": "The variables the group set."},
    )
    stopped = fields.Boolean(required=True)
    phase = fields.String(required=True, validate=validate.OneOf([p.value for p in AppPhase]))
    message = fields.String(required=True, metadata={"description": "Why, for Error."})
    created = fields.String(required=True)
    creator = fields.String(required=True)
    status = status_field(
        S.RUNNING, S.TERMINATING, description="`terminating` once its deletion began."
    )


class AppSchema(AppRecordSchema):
    """A group's app."""

    url = fields.String(required=True, metadata={"description": "Where its pages are."})


class AppVariableSchema(Schema):
    name = fields.String(required=True)
    description = fields.String(required=True)
    default_value = fields.String(allow_none=True)
    optional = fields.Boolean(required=True)


class AppTemplateSchema(Schema):
    """A template groups make apps from."""

    name = fields.String(required=True)
    version = fields.String(required=True)
    description = fields.String(required=True)
    doc_link = fields.String(allow_none=True)
    image = fields.String(required=True, metadata={"description": "Its container's image."})
    http_port = fields.Integer(required=True)
    default_envs = fields.List(fields.Nested(AppVariableSchema), required=True)


class AppLogsSchema(Schema):
    pod = fields.String(allow_none=True, metadata={"description": "The pod read; none if none."})
    lines = fields.List(fields.String(), required=True)

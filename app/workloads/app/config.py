"""Schema of the ``apps`` section of the configuration: templates, access, storage, quotas."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, validate, validates_schema

from app.config_fields import (
    DNS_LABEL,
    ENV_NAME,
    ConfigModelSchema,
    ConfigSections,
    CpuField,
    GroupSettingsSchema,
    MemoryField,
    SourceTypedSchema,
    StrictCamelCaseSchema,
    refuse_duplicates,
)
from app.models.config import (
    AppQuota,
    AppsConfig,
    AppServicePort,
    AppTemplate,
    AppVariable,
    GroupAppQuota,
    GroupVolume,
)

PRESET_VARIABLES = ("APP_ID", "APP_ROOT", "APP_BASE_URL", "PLATFORM_URL", "GROUP")
"""What the service sets in every app's environment, before the template's and the group's
variables (which may refer to them as ``$(APP_ROOT)``); no template or group sets them."""

_PORT = validate.Range(min=1, max=65535)
_GROUP_VOLUME_SOURCES = {
    "nfs": ("server", "path"),
    "hostPath": ("path",),
    "persistentVolumeClaim": ("claim_name",),
}


class AppVariableSchema(ConfigModelSchema):
    model = AppVariable

    name = fields.String(required=True, validate=ENV_NAME)
    description = fields.String(load_default="")
    default_value = fields.String(load_default=None, attribute="default")
    optional = fields.Boolean(load_default=False)

    @validates_schema
    def _not_preset(self, data: dict[str, Any], **_: Any) -> None:
        if data.get("name") in PRESET_VARIABLES:
            raise ValidationError("set by the service for every app", "name")


class PortOrNameField(fields.Field):
    """A container port: its number or its name."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int | str:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ValidationError("must be a port number or a port name")
        if isinstance(value, int) and not 1 <= value <= 65535:
            raise ValidationError("must be between 1 and 65535")
        return value


class AppServicePortSchema(ConfigModelSchema):
    model = AppServicePort

    name = fields.String(required=True, validate=DNS_LABEL)
    port = fields.Integer(required=True, validate=_PORT)
    target_port = PortOrNameField(load_default=None)

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        target = data["target_port"] if data["target_port"] is not None else data["port"]
        return {**data, "target_port": target}


def _pod_spec(value: Any) -> None:
    """A template's pod needs a first container with a name and an image; the rest is the
    template author's, passed to Kubernetes as written."""
    containers = value.get("containers") if isinstance(value, dict) else None
    if not isinstance(containers, list) or not containers:
        raise ValidationError("must have containers, the first of which runs the app")
    first = containers[0]
    if not isinstance(first, dict) or not first.get("name") or not first.get("image"):
        raise ValidationError("the first container needs a name and an image")


MAX_TEMPLATE_NAME = 40
"""An app's id is ``<template>-<5 characters>`` and its objects ``app-<id>``: a Service's name
must stay a DNS label of at most 63 characters."""


class AppTemplateSchema(ConfigModelSchema):
    model = AppTemplate

    name = fields.String(
        required=True,
        validate=[
            validate.Regexp(r"^[a-z]", error="must start with a letter"),
            DNS_LABEL,
            validate.Length(max=MAX_TEMPLATE_NAME),
        ],
    )
    version = fields.String(required=True, validate=validate.Length(min=1))
    description = fields.String(load_default="")
    doc_link = fields.Url(load_default=None)
    pod_template = fields.Dict(
        required=True,
        attribute="pod_spec",
        validate=_pod_spec,
        metadata={"description": "A pod spec; only its first container is used."},
    )
    service_ports = fields.List(
        fields.Nested(AppServicePortSchema), required=True, validate=validate.Length(min=1)
    )
    http_port = fields.Integer(required=True, validate=_PORT)
    default_envs = fields.List(
        fields.Nested(AppVariableSchema), load_default=list, attribute="variables"
    )

    @validates_schema
    def _ports(self, data: dict[str, Any], **_: Any) -> None:
        ports = [p.port for p in data.get("service_ports") or []]
        if data.get("http_port") is not None and data["http_port"] not in ports:
            raise ValidationError("must be one of the service ports", "httpPort")
        names = (v.name for v in data.get("variables") or [])
        refuse_duplicates(names, "names", "defaultEnvs")


class GroupVolumeSchema(SourceTypedSchema):
    model = GroupVolume
    sources = _GROUP_VOLUME_SOURCES

    type = fields.String(required=True, validate=validate.OneOf(sorted(_GROUP_VOLUME_SOURCES)))
    server = fields.String(load_default=None)
    path = fields.String(load_default=None, validate=validate.Regexp(r"^/"))
    claim_name = fields.String(load_default=None)
    mount_path = fields.String(load_default="/group", validate=validate.Regexp(r"^/"))


class AppQuotaSchema(ConfigModelSchema):
    model = AppQuota

    cpu = CpuField(load_default=4.0)
    memory = MemoryField(load_default=16 * 2**30)
    gpus = fields.Integer(load_default=0, validate=validate.Range(min=0))


class GroupAppQuotaSchema(GroupSettingsSchema, AppQuotaSchema):
    group_model = GroupAppQuota


class AppQuotasSchema(StrictCamelCaseSchema):
    default = fields.Nested(AppQuotaSchema, load_default=lambda: AppQuotaSchema().load({}))
    groups = fields.List(fields.Nested(GroupAppQuotaSchema), load_default=list)


class AppsSchema(ConfigModelSchema):
    model = AppsConfig

    templates = fields.List(fields.Nested(AppTemplateSchema), load_default=list)
    base_url = fields.Url(load_default="https://data.example.org", require_tld=False)
    path_prefix = fields.String(
        load_default="/apps", validate=validate.Regexp(r"^/[a-z0-9/_-]*[a-z0-9_-]$")
    )
    platform_scopes = fields.List(
        fields.String(validate=validate.Length(min=1)),
        load_default=lambda: ["exec:notebook"],
        validate=validate.Length(min=1),
    )
    group_scope = fields.String(
        load_default="app:{group}",
        validate=validate.Regexp(r".*\{group\}", error="must contain {{group}}"),
    )
    ingress_namespaces = fields.List(
        fields.String(validate=DNS_LABEL), load_default=lambda: ["ingress-nginx"]
    )
    group_volume = fields.Nested(GroupVolumeSchema, load_default=None, allow_none=True)
    quotas = fields.Nested(AppQuotasSchema, load_default=lambda: AppQuotasSchema().load({}))

    @validates_schema
    def _unique(self, data: dict[str, Any], **_: Any) -> None:
        refuse_duplicates((t.name for t in data.get("templates") or []), "names", "templates")
        groups = (q.group for q in (data.get("quotas") or {}).get("groups") or [])
        refuse_duplicates(groups, "groups", "quotas")

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        quotas = data.pop("quotas")
        return {
            **data,
            "base_url": data["base_url"].rstrip("/"),
            "default_quota": quotas["default"],
            "group_quotas": quotas["groups"],
        }


SECTIONS: ConfigSections = {
    "apps": fields.Nested(AppsSchema, load_default=lambda: AppsSchema().load({}))
}
"""The app kind's section of the configuration."""

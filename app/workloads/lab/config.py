"""Schema of the ``lab`` section of the configuration: sizes, the environment and Secrets,
volumes and init containers, placement, the lab's port and URL, timeouts, network policy."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, validate, validates_schema

from app.config_fields import (
    ABSOLUTE_PATH,
    DNS_LABEL,
    ENV_NAME,
    POSITIVE,
    ConfigModelSchema,
    ConfigSections,
    CpuField,
    MemoryField,
    SourceTypedSchema,
    StrictCamelCaseSchema,
    environment_field,
    refuse_duplicates,
)
from app.models.config import (
    CopiedSecret,
    InitContainer,
    LabConfig,
    LabSize,
    LabVolume,
    LabVolumeMount,
    NetworkPolicyConfig,
    Toleration,
)
from app.url_template import DEFAULT_TEMPLATE, template_problem


def _url_template(value: str) -> None:
    """Reject a ``lab.internalUrl`` template at load time rather than at every spawn."""
    problem = template_problem(value)
    if problem is not None:
        raise ValidationError(problem)


class SizeRequestsSchema(StrictCamelCaseSchema):
    cpu = CpuField(load_default=None)
    memory = MemoryField(load_default=None)


class LabSizeSchema(ConfigModelSchema):
    model = LabSize

    name = fields.String(required=True, validate=DNS_LABEL)
    cpu = CpuField(required=True)
    memory = MemoryField(required=True)
    requests = fields.Nested(SizeRequestsSchema, load_default=dict)
    groups = fields.List(fields.String(validate=validate.Length(min=1)), load_default=list)

    @validates_schema
    def _requests_within_limits(self, data: dict[str, Any], **_: Any) -> None:
        requests = data.get("requests") or {}
        if requests.get("cpu") is not None and requests["cpu"] > data.get("cpu", 0):
            raise ValidationError("must not exceed cpu", "requests.cpu")
        if requests.get("memory") is not None and requests["memory"] > data.get("memory", 0):
            raise ValidationError("must not exceed memory", "requests.memory")

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        # Labs are mostly idle: by default reserve a quarter of the limit, as notebook
        # platforms commonly do, so a node packs more labs than its hard capacity allows.
        requests = data.pop("requests")
        return {
            **data,
            "cpu_request": requests.get("cpu") or data["cpu"] / 4,
            "memory_request": requests.get("memory") or data["memory"] // 4,
        }


class CopiedSecretSchema(ConfigModelSchema):
    model = CopiedSecret

    secret_name = fields.String(required=True, validate=DNS_LABEL)
    secret_key = fields.String(
        required=True,
        validate=validate.Regexp(r"^[-._a-zA-Z0-9]+$", error="must be a Secret key"),
    )
    env = fields.String(load_default=None, validate=ENV_NAME)


_VOLUME_SOURCES = {
    "hostPath": ("path",),
    "nfs": ("server", "path"),
    "persistentVolumeClaim": ("claim_name",),
    "emptyDir": (),
}


class LabVolumeSchema(SourceTypedSchema):
    model = LabVolume
    sources = _VOLUME_SOURCES

    name = fields.String(required=True, validate=DNS_LABEL)
    type = fields.String(required=True, validate=validate.OneOf(sorted(_VOLUME_SOURCES)))
    path = fields.String(load_default=None, validate=ABSOLUTE_PATH)
    server = fields.String(load_default=None)
    claim_name = fields.String(load_default=None, validate=DNS_LABEL)
    read_only = fields.Boolean(load_default=False)


class LabVolumeMountSchema(ConfigModelSchema):
    model = LabVolumeMount

    volume_name = fields.String(required=True)
    mount_path = fields.String(required=True, validate=ABSOLUTE_PATH)
    sub_path = fields.String(load_default=None)
    read_only = fields.Boolean(load_default=False)


class InitContainerSchema(ConfigModelSchema):
    model = InitContainer

    name = fields.String(required=True, validate=DNS_LABEL)
    image = fields.String(required=True, validate=validate.Length(min=1))
    privileged = fields.Boolean(load_default=False)
    command = fields.List(fields.String(), load_default=list)
    args = fields.List(fields.String(), load_default=list)
    volume_mounts = fields.List(fields.Nested(LabVolumeMountSchema), load_default=list)
    env = environment_field(
        metadata={
            "description": (
                "Variables this container gets besides USER, UID, GID and HOME (which win). "
                "It reads nothing of the lab's environment."
            )
        },
    )


class TolerationSchema(ConfigModelSchema):
    model = Toleration

    key = fields.String(load_default=None)
    operator = fields.String(load_default="Equal", validate=validate.OneOf(["Equal", "Exists"]))
    value = fields.String(load_default=None)
    effect = fields.String(
        load_default=None,
        validate=validate.OneOf(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
    )
    toleration_seconds = fields.Integer(load_default=None)


class PodPlacementSchema(StrictCamelCaseSchema):
    """The keys that place a pod on nodes, for a section of a pod the service makes (the
    lab's, the administrators' pod) to inherit: Kubernetes' node selector and tolerations."""

    node_selector = fields.Dict(keys=fields.String(), values=fields.String(), load_default=dict)
    tolerations = fields.List(fields.Nested(TolerationSchema), load_default=list)


class NetworkPolicySchema(ConfigModelSchema):
    model = NetworkPolicyConfig

    enabled = fields.Boolean(load_default=True)
    ingress_namespaces = fields.List(fields.String(validate=DNS_LABEL), load_default=list)


class LabSchema(PodPlacementSchema, ConfigModelSchema):
    model = LabConfig

    sizes = fields.List(
        fields.Nested(LabSizeSchema), required=True, validate=validate.Length(min=1)
    )
    env = environment_field()
    secrets = fields.List(fields.Nested(CopiedSecretSchema), load_default=list)
    pull_secret = fields.String(load_default=None, validate=DNS_LABEL)
    secrets_path = fields.String(load_default="/opt/lab/secrets", validate=ABSOLUTE_PATH)
    volumes = fields.List(fields.Nested(LabVolumeSchema), load_default=list)
    volume_mounts = fields.List(fields.Nested(LabVolumeMountSchema), load_default=list)
    init_containers = fields.List(fields.Nested(InitContainerSchema), load_default=list)
    command = fields.List(fields.String(), load_default=list)
    args = fields.List(fields.String(), load_default=list)
    port = fields.Integer(load_default=8888, validate=validate.Range(min=1, max=65535))
    internal_url = fields.String(load_default=DEFAULT_TEMPLATE, validate=_url_template)
    spawn_timeout = fields.Float(load_default=600.0, validate=POSITIVE)
    delete_timeout = fields.Float(load_default=300.0, validate=POSITIVE)
    network_policy = fields.Nested(
        NetworkPolicySchema,
        load_default=lambda: NetworkPolicySchema().load({}),
    )

    @validates_schema
    def _consistent(self, data: dict[str, Any], **_: Any) -> None:
        for key in ("sizes", "volumes"):
            refuse_duplicates((item.name for item in data.get(key, [])), "entries", key)
        volumes = {v.name for v in data.get("volumes", [])}
        mounts = list(data.get("volume_mounts", []))
        for container in data.get("init_containers", []):
            mounts.extend(container.volume_mounts)
        for mount in mounts:
            if mount.volume_name not in volumes:
                raise ValidationError(
                    f"mount refers to unknown volume {mount.volume_name!r}", "volumeMounts"
                )


SECTIONS: ConfigSections = {"lab": fields.Nested(LabSchema, required=True)}
"""The lab kind's section of the configuration, which every deployment writes."""

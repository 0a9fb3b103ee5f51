"""Schema of the ``lab`` section of the configuration: sizes, the environment and Secrets,
volumes and init containers, placement, the lab's port and URL, timeouts, network policy."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, post_load, validate, validates_schema

from app.config_fields import (
    ABSOLUTE_PATH,
    DNS_LABEL,
    ENV_NAME,
    POSITIVE,
    ConfigSections,
    CpuField,
    MemoryField,
    StrictCamelCaseSchema,
    camel_case,
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


class LabSizeSchema(StrictCamelCaseSchema):
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

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> LabSize:
        # Labs are mostly idle: by default reserve a quarter of the limit, as notebook
        # platforms commonly do, so a node packs more labs than its hard capacity allows.
        requests = data["requests"]
        return LabSize(
            name=data["name"],
            cpu=data["cpu"],
            memory=data["memory"],
            cpu_request=requests.get("cpu") or data["cpu"] / 4,
            memory_request=requests.get("memory") or data["memory"] // 4,
            groups=tuple(data["groups"]),
        )


class CopiedSecretSchema(StrictCamelCaseSchema):
    secret_name = fields.String(required=True, validate=DNS_LABEL)
    secret_key = fields.String(
        required=True,
        validate=validate.Regexp(r"^[-._a-zA-Z0-9]+$", error="must be a Secret key"),
    )
    env = fields.String(load_default=None, validate=ENV_NAME)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> CopiedSecret:
        return CopiedSecret(**data)


_VOLUME_SOURCES = {
    "hostPath": ("path",),
    "nfs": ("server", "path"),
    "persistentVolumeClaim": ("claim_name",),
    "emptyDir": (),
}


class LabVolumeSchema(StrictCamelCaseSchema):
    name = fields.String(required=True, validate=DNS_LABEL)
    type = fields.String(required=True, validate=validate.OneOf(sorted(_VOLUME_SOURCES)))
    path = fields.String(load_default=None, validate=ABSOLUTE_PATH)
    server = fields.String(load_default=None)
    claim_name = fields.String(load_default=None, validate=DNS_LABEL)
    read_only = fields.Boolean(load_default=False)

    @validates_schema
    def _source_fields(self, data: dict[str, Any], **_: Any) -> None:
        for needed in _VOLUME_SOURCES.get(data.get("type", ""), ()):
            if not data.get(needed):
                raise ValidationError(f"required for type {data['type']}", camel_case(needed))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> LabVolume:
        return LabVolume(**data)


class LabVolumeMountSchema(StrictCamelCaseSchema):
    volume_name = fields.String(required=True)
    mount_path = fields.String(required=True, validate=ABSOLUTE_PATH)
    sub_path = fields.String(load_default=None)
    read_only = fields.Boolean(load_default=False)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> LabVolumeMount:
        return LabVolumeMount(**data)


class InitContainerSchema(StrictCamelCaseSchema):
    name = fields.String(required=True, validate=DNS_LABEL)
    image = fields.String(required=True, validate=validate.Length(min=1))
    privileged = fields.Boolean(load_default=False)
    command = fields.List(fields.String(), load_default=list)
    args = fields.List(fields.String(), load_default=list)
    volume_mounts = fields.List(fields.Nested(LabVolumeMountSchema), load_default=list)
    env = fields.Dict(
        keys=fields.String(validate=ENV_NAME),
        values=fields.String(),
        load_default=dict,
        metadata={
            "description": (
                "Variables this container gets besides USER, UID, GID and HOME (which win). "
                "It reads nothing of the lab's environment."
            )
        },
    )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> InitContainer:
        return InitContainer(
            name=data["name"],
            image=data["image"],
            privileged=data["privileged"],
            command=tuple(data["command"]),
            args=tuple(data["args"]),
            volume_mounts=tuple(data["volume_mounts"]),
            env=dict(data["env"]),
        )


class TolerationSchema(StrictCamelCaseSchema):
    key = fields.String(load_default=None)
    operator = fields.String(load_default="Equal", validate=validate.OneOf(["Equal", "Exists"]))
    value = fields.String(load_default=None)
    effect = fields.String(
        load_default=None,
        validate=validate.OneOf(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
    )
    toleration_seconds = fields.Integer(load_default=None)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> Toleration:
        return Toleration(**data)


class NetworkPolicySchema(StrictCamelCaseSchema):
    enabled = fields.Boolean(load_default=True)
    ingress_namespaces = fields.List(fields.String(validate=DNS_LABEL), load_default=list)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> NetworkPolicyConfig:
        return NetworkPolicyConfig(
            enabled=data["enabled"], ingress_namespaces=tuple(data["ingress_namespaces"])
        )


class LabSchema(StrictCamelCaseSchema):
    sizes = fields.List(
        fields.Nested(LabSizeSchema), required=True, validate=validate.Length(min=1)
    )
    env = fields.Dict(
        keys=fields.String(validate=ENV_NAME), values=fields.String(), load_default=dict
    )
    secrets = fields.List(fields.Nested(CopiedSecretSchema), load_default=list)
    pull_secret = fields.String(load_default=None, validate=DNS_LABEL)
    secrets_path = fields.String(load_default="/opt/lab/secrets", validate=ABSOLUTE_PATH)
    volumes = fields.List(fields.Nested(LabVolumeSchema), load_default=list)
    volume_mounts = fields.List(fields.Nested(LabVolumeMountSchema), load_default=list)
    init_containers = fields.List(fields.Nested(InitContainerSchema), load_default=list)
    node_selector = fields.Dict(keys=fields.String(), values=fields.String(), load_default=dict)
    tolerations = fields.List(fields.Nested(TolerationSchema), load_default=list)
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
        for key, items in (("sizes", "name"), ("volumes", "name")):
            names = [getattr(i, items) for i in data.get(key, [])]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise ValidationError(f"duplicate entries: {', '.join(duplicates)}", key)
        volumes = {v.name for v in data.get("volumes", [])}
        mounts = list(data.get("volume_mounts", []))
        for container in data.get("init_containers", []):
            mounts.extend(container.volume_mounts)
        for mount in mounts:
            if mount.volume_name not in volumes:
                raise ValidationError(
                    f"mount refers to unknown volume {mount.volume_name!r}", "volumeMounts"
                )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> LabConfig:
        return LabConfig(
            sizes=tuple(data["sizes"]),
            env=dict(data["env"]),
            secrets=tuple(data["secrets"]),
            pull_secret=data["pull_secret"],
            secrets_path=data["secrets_path"],
            volumes=tuple(data["volumes"]),
            volume_mounts=tuple(data["volume_mounts"]),
            init_containers=tuple(data["init_containers"]),
            node_selector=dict(data["node_selector"]),
            tolerations=tuple(data["tolerations"]),
            command=tuple(data["command"]),
            args=tuple(data["args"]),
            port=data["port"],
            internal_url=data["internal_url"],
            spawn_timeout=data["spawn_timeout"],
            delete_timeout=data["delete_timeout"],
            network_policy=data["network_policy"],
        )


SECTIONS: ConfigSections = {"lab": fields.Nested(LabSchema, required=True)}
"""The lab kind's section of the configuration, which every deployment writes."""

"""Schema of the service's YAML configuration.

Keys are camelCase, as in the Helm values they are rendered from. Unknown keys are rejected at
every level so a typo in a deployment fails loudly at start-up instead of being ignored.
"""

from __future__ import annotations

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

from app.config.models import (
    Config,
    CopiedSecret,
    GafaelfawrConfig,
    InitContainer,
    KubernetesConfig,
    LabConfig,
    LabImage,
    LabSize,
    LabVolume,
    LabVolumeMount,
    NetworkPolicyConfig,
    OperationsConfig,
    RedisConfig,
    Toleration,
    WatcherConfig,
)
from app.quantities import parse_cpu, parse_memory

_POSITIVE = validate.Range(min=0, min_inclusive=False)
_ENV_NAME = validate.Regexp(
    r"^[A-Za-z_][A-Za-z0-9_]*$", error="must be an environment variable name"
)
_ABSOLUTE_PATH = validate.Regexp(r"^/", error="must be an absolute path")
_DNS_LABEL = validate.Regexp(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    error="must be a DNS label: lowercase letters, digits and '-'",
)


class _StrictSchema(Schema):
    """Base schema: unknown keys are errors, not silently dropped."""

    class Meta:
        unknown = RAISE


class GafaelfawrSchema(_StrictSchema):
    url = fields.Url(required=True, require_tld=False, schemes={"http", "https"})
    timeout = fields.Float(load_default=5.0, validate=_POSITIVE)
    cache_seconds = fields.Integer(
        data_key="cacheSeconds", load_default=30, validate=validate.Range(min=0, max=3600)
    )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> GafaelfawrConfig:
        data["url"] = data["url"].rstrip("/")
        return GafaelfawrConfig(**data)


class RedisSchema(_StrictSchema):
    url = fields.String(load_default="redis://127.0.0.1:6379/0")
    key_prefix = fields.String(data_key="keyPrefix", load_default="spawner:")
    socket_timeout = fields.Float(data_key="socketTimeout", load_default=5.0, validate=_POSITIVE)
    socket_connect_timeout = fields.Float(
        data_key="socketConnectTimeout", load_default=2.0, validate=_POSITIVE
    )
    max_connections = fields.Integer(
        data_key="maxConnections", load_default=1000, validate=validate.Range(min=1)
    )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> RedisConfig:
        return RedisConfig(**data)


class KubernetesSchema(_StrictSchema):
    mode = fields.String(
        load_default="auto",
        validate=validate.OneOf(["auto", "in-cluster", "kubeconfig", "host"]),
    )
    host = fields.Url(load_default=None, require_tld=False, schemes={"http", "https"})
    kubeconfig = fields.String(load_default=None)
    request_timeout = fields.Float(data_key="requestTimeout", load_default=10.0, validate=_POSITIVE)
    service_namespace = fields.String(
        data_key="serviceNamespace", load_default="nublado", validate=_DNS_LABEL
    )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> KubernetesConfig:
        return KubernetesConfig(**data)


class CpuField(fields.Field):
    """CPU cores, as a number or a Kubernetes quantity (``500m``)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        try:
            cores = parse_cpu(value)
        except (ValueError, TypeError):
            raise ValidationError("not a CPU quantity (examples: 2, 0.5, 500m)") from None
        if cores <= 0:
            raise ValidationError("must be greater than 0")
        return cores


class MemoryField(fields.Field):
    """Memory in bytes, as a number or a Kubernetes quantity (``4Gi``)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        try:
            size = parse_memory(value)
        except (ValueError, TypeError):
            raise ValidationError("not a memory quantity (examples: 4Gi, 512Mi)") from None
        if size <= 0:
            raise ValidationError("must be greater than 0")
        return size


class LabImageSchema(_StrictSchema):
    reference = fields.String(required=True, validate=validate.Length(min=1))
    name = fields.String(required=True)
    digest = fields.String(
        load_default=None,
        validate=validate.Regexp(r"^sha256:[0-9a-f]{64}$", error="must be sha256:<64 hex>"),
    )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> LabImage:
        return LabImage(**data)


class SizeRequestsSchema(_StrictSchema):
    cpu = CpuField(load_default=None)
    memory = MemoryField(load_default=None)


class LabSizeSchema(_StrictSchema):
    name = fields.String(required=True, validate=_DNS_LABEL)
    cpu = CpuField(required=True)
    memory = MemoryField(required=True)
    requests = fields.Nested(SizeRequestsSchema, load_default=dict)

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
        )


class CopiedSecretSchema(_StrictSchema):
    secret_name = fields.String(data_key="secretName", required=True, validate=_DNS_LABEL)
    secret_key = fields.String(
        data_key="secretKey",
        required=True,
        validate=validate.Regexp(r"^[-._a-zA-Z0-9]+$", error="must be a Secret key"),
    )
    env = fields.String(load_default=None, validate=_ENV_NAME)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> CopiedSecret:
        return CopiedSecret(**data)


_VOLUME_SOURCES = {
    "hostPath": ("path",),
    "nfs": ("server", "path"),
    "persistentVolumeClaim": ("claim_name",),
    "emptyDir": (),
}


class LabVolumeSchema(_StrictSchema):
    name = fields.String(required=True, validate=_DNS_LABEL)
    type = fields.String(required=True, validate=validate.OneOf(sorted(_VOLUME_SOURCES)))
    path = fields.String(load_default=None, validate=_ABSOLUTE_PATH)
    server = fields.String(load_default=None)
    claim_name = fields.String(data_key="claimName", load_default=None, validate=_DNS_LABEL)
    read_only = fields.Boolean(data_key="readOnly", load_default=False)

    @validates_schema
    def _source_fields(self, data: dict[str, Any], **_: Any) -> None:
        for needed in _VOLUME_SOURCES.get(data.get("type", ""), ()):
            if not data.get(needed):
                key = "claimName" if needed == "claim_name" else needed
                raise ValidationError(f"required for type {data['type']}", key)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> LabVolume:
        return LabVolume(**data)


class LabVolumeMountSchema(_StrictSchema):
    volume_name = fields.String(data_key="volumeName", required=True)
    mount_path = fields.String(data_key="mountPath", required=True, validate=_ABSOLUTE_PATH)
    sub_path = fields.String(data_key="subPath", load_default=None)
    read_only = fields.Boolean(data_key="readOnly", load_default=False)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> LabVolumeMount:
        return LabVolumeMount(**data)


class InitContainerSchema(_StrictSchema):
    name = fields.String(required=True, validate=_DNS_LABEL)
    image = fields.String(required=True, validate=validate.Length(min=1))
    privileged = fields.Boolean(load_default=False)
    command = fields.List(fields.String(), load_default=list)
    args = fields.List(fields.String(), load_default=list)
    volume_mounts = fields.List(
        fields.Nested(LabVolumeMountSchema), data_key="volumeMounts", load_default=list
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
        )


class TolerationSchema(_StrictSchema):
    key = fields.String(load_default=None)
    operator = fields.String(load_default="Equal", validate=validate.OneOf(["Equal", "Exists"]))
    value = fields.String(load_default=None)
    effect = fields.String(
        load_default=None,
        validate=validate.OneOf(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
    )
    toleration_seconds = fields.Integer(data_key="tolerationSeconds", load_default=None)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> Toleration:
        return Toleration(**data)


class NetworkPolicySchema(_StrictSchema):
    enabled = fields.Boolean(load_default=True)
    ingress_namespaces = fields.List(
        fields.String(validate=_DNS_LABEL), data_key="ingressNamespaces", load_default=list
    )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> NetworkPolicyConfig:
        return NetworkPolicyConfig(
            enabled=data["enabled"], ingress_namespaces=tuple(data["ingress_namespaces"])
        )


class LabSchema(_StrictSchema):
    images = fields.List(
        fields.Nested(LabImageSchema), required=True, validate=validate.Length(min=1)
    )
    sizes = fields.List(
        fields.Nested(LabSizeSchema), required=True, validate=validate.Length(min=1)
    )
    env = fields.Dict(
        keys=fields.String(validate=_ENV_NAME), values=fields.String(), load_default=dict
    )
    secrets = fields.List(fields.Nested(CopiedSecretSchema), load_default=list)
    pull_secret = fields.String(data_key="pullSecret", load_default=None, validate=_DNS_LABEL)
    secrets_path = fields.String(
        data_key="secretsPath", load_default="/opt/lab/secrets", validate=_ABSOLUTE_PATH
    )
    volumes = fields.List(fields.Nested(LabVolumeSchema), load_default=list)
    volume_mounts = fields.List(
        fields.Nested(LabVolumeMountSchema), data_key="volumeMounts", load_default=list
    )
    init_containers = fields.List(
        fields.Nested(InitContainerSchema), data_key="initContainers", load_default=list
    )
    node_selector = fields.Dict(
        keys=fields.String(), values=fields.String(), data_key="nodeSelector", load_default=dict
    )
    tolerations = fields.List(fields.Nested(TolerationSchema), load_default=list)
    command = fields.List(fields.String(), load_default=list)
    args = fields.List(fields.String(), load_default=list)
    port = fields.Integer(load_default=8888, validate=validate.Range(min=1, max=65535))
    spawn_timeout = fields.Float(data_key="spawnTimeout", load_default=600.0, validate=_POSITIVE)
    delete_timeout = fields.Float(data_key="deleteTimeout", load_default=300.0, validate=_POSITIVE)
    network_policy = fields.Nested(
        NetworkPolicySchema,
        data_key="networkPolicy",
        load_default=lambda: NetworkPolicySchema().load({}),
    )

    @validates_schema
    def _consistent(self, data: dict[str, Any], **_: Any) -> None:
        for key, items in (("images", "reference"), ("sizes", "name"), ("volumes", "name")):
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
            images=tuple(data["images"]),
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
            spawn_timeout=data["spawn_timeout"],
            delete_timeout=data["delete_timeout"],
            network_policy=data["network_policy"],
        )


class OperationsSchema(_StrictSchema):
    lease_seconds = fields.Float(
        data_key="leaseSeconds", load_default=10.0, validate=validate.Range(min=1)
    )
    scan_seconds = fields.Float(
        data_key="scanSeconds", load_default=2.0, validate=validate.Range(min=0.1)
    )
    keepalive_seconds = fields.Float(
        data_key="keepaliveSeconds", load_default=15.0, validate=validate.Range(min=0.1)
    )
    max_concurrent = fields.Integer(
        data_key="maxConcurrent", load_default=32, validate=validate.Range(min=1, max=10000)
    )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> OperationsConfig:
        return OperationsConfig(**data)


class WatcherSchema(_StrictSchema):
    lease_seconds = fields.Float(
        data_key="leaseSeconds", load_default=15.0, validate=validate.Range(min=1)
    )
    watch_seconds = fields.Integer(
        data_key="watchSeconds", load_default=60, validate=validate.Range(min=1, max=3600)
    )
    reconcile_seconds = fields.Float(
        data_key="reconcileSeconds", load_default=60.0, validate=validate.Range(min=0.1)
    )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> WatcherConfig:
        return WatcherConfig(**data)


class ConfigSchema(_StrictSchema):
    log_level = fields.String(
        data_key="logLevel",
        load_default="INFO",
        validate=validate.OneOf(["DEBUG", "INFO", "WARNING", "ERROR"]),
    )
    namespace_prefix = fields.String(
        data_key="namespacePrefix", load_default="nublado", validate=_DNS_LABEL
    )
    gafaelfawr = fields.Nested(GafaelfawrSchema, required=True)
    redis = fields.Nested(RedisSchema, load_default=lambda: RedisSchema().load({}))
    kubernetes = fields.Nested(KubernetesSchema, load_default=lambda: KubernetesSchema().load({}))
    lab = fields.Nested(LabSchema, required=True)
    operations = fields.Nested(OperationsSchema, load_default=lambda: OperationsSchema().load({}))
    watcher = fields.Nested(WatcherSchema, load_default=lambda: WatcherSchema().load({}))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> Config:
        return Config(**data)

"""Schema of the service's YAML configuration.

Keys are camelCase, as in the Helm values they are rendered from. Unknown keys are rejected at
every level so a typo in a deployment fails loudly at start-up instead of being ignored.
"""

from __future__ import annotations

from typing import Any

from marshmallow import (
    ValidationError,
    fields,
    post_load,
    validate,
    validates_schema,
)

from app.config_fields import CpuField, MemoryField, StrictCamelCaseSchema, camel_case
from app.models.config import (
    DEFAULT_ADMIN_POD_SCOPE,
    AdminConfig,
    AdminPodConfig,
    AdmissionConfig,
    Budget,
    BudgetsConfig,
    ClustersConfig,
    Config,
    CopiedSecret,
    GafaelfawrConfig,
    GroupBudget,
    HardwareTier,
    ImagesConfig,
    ImageValidation,
    InitContainer,
    KubernetesConfig,
    LabConfig,
    LabSize,
    LabVolume,
    LabVolumeMount,
    LimitsConfig,
    NetworkPolicyConfig,
    OperationsConfig,
    PrepullConfig,
    PrepullerConfig,
    RedisConfig,
    RedisSentinelConfig,
    SimpleImage,
    SourceType,
    Toleration,
    WatcherConfig,
)
from app.url_template import DEFAULT_TEMPLATE, template_problem
from app.workloads.app.config import AppsSchema
from app.workloads.cluster.adapters import ADAPTERS

_POSITIVE = validate.Range(min=0, min_inclusive=False)
_ENV_NAME = validate.Regexp(
    r"^[A-Za-z_][A-Za-z0-9_]*$", error="must be an environment variable name"
)
_ABSOLUTE_PATH = validate.Regexp(r"^/", error="must be an absolute path")
_DNS_LABEL = validate.Regexp(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    error="must be a DNS label: lowercase letters, digits and '-'",
)


def _url_template(value: str) -> None:
    """Reject a ``lab.internalUrl`` template at load time rather than at every spawn."""
    problem = template_problem(value)
    if problem is not None:
        raise ValidationError(problem)


class GafaelfawrSchema(StrictCamelCaseSchema):
    url = fields.Url(required=True, require_tld=False, schemes={"http", "https"})
    timeout = fields.Float(load_default=3.0, validate=_POSITIVE)
    cache_seconds = fields.Integer(load_default=30, validate=validate.Range(min=0, max=3600))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> GafaelfawrConfig:
        data["url"] = data["url"].rstrip("/")
        return GafaelfawrConfig(**data)


DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
"""Where Redis is when the configuration names neither a URL nor sentinels."""


def parse_address(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` for an IPv6 literal) as a pair; ValueError if malformed."""
    host, colon, port = text.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not host:port")
    return host, int(port)


class AddressField(fields.String):
    """A ``host:port`` string, loaded as a ``(host, port)`` pair."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            return parse_address(text)
        except ValueError as exc:
            raise ValidationError(f"{exc}, e.g. redis-sentinel:26379") from None


class RedisSentinelSchema(StrictCamelCaseSchema):
    addresses = fields.List(AddressField(), required=True, validate=validate.Length(min=1))
    service_name = fields.String(load_default="mymaster", validate=validate.Length(min=1))
    db = fields.Integer(load_default=0, validate=validate.Range(min=0))
    username = fields.String(load_default=None, validate=validate.Length(min=1))
    sentinel_username = fields.String(load_default=None, validate=validate.Length(min=1))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> RedisSentinelConfig:
        # The password is read from the environment by the loader, never from the file.
        return RedisSentinelConfig(
            **{**data, "addresses": tuple(data["addresses"])}, sentinel_password=None
        )


class RedisSchema(StrictCamelCaseSchema):
    url = fields.String(load_default=None, validate=validate.Length(min=1))
    sentinel = fields.Nested(RedisSentinelSchema, load_default=None)
    key_prefix = fields.String(load_default="spawner:")
    socket_timeout = fields.Float(load_default=2.0, validate=_POSITIVE)
    socket_connect_timeout = fields.Float(load_default=1.0, validate=_POSITIVE)
    max_connections = fields.Integer(load_default=1000, validate=validate.Range(min=1))

    @validates_schema
    def _one_address(self, data: dict[str, Any], **_: Any) -> None:
        if data.get("url") is not None and data.get("sentinel") is not None:
            raise ValidationError(
                "give either url (one Redis server) or sentinel (Redis Sentinel), not both",
                "sentinel",
            )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> RedisConfig:
        if data["url"] is None and data["sentinel"] is None:
            data["url"] = DEFAULT_REDIS_URL
        # The password is read from the environment by the loader, never from the file.
        return RedisConfig(**data, password=None)


class KubernetesSchema(StrictCamelCaseSchema):
    mode = fields.String(
        load_default="auto",
        validate=validate.OneOf(["auto", "in-cluster", "kubeconfig", "host"]),
    )
    host = fields.Url(load_default=None, require_tld=False, schemes={"http", "https"})
    kubeconfig = fields.String(load_default=None)
    request_timeout = fields.Float(load_default=10.0, validate=_POSITIVE)
    service_namespace = fields.String(load_default="nublado", validate=_DNS_LABEL)
    certificate_authority = fields.String(load_default=None, validate=validate.Length(min=1))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> KubernetesConfig:
        return KubernetesConfig(**data)


class SizeRequestsSchema(StrictCamelCaseSchema):
    cpu = CpuField(load_default=None)
    memory = MemoryField(load_default=None)


class LabSizeSchema(StrictCamelCaseSchema):
    name = fields.String(required=True, validate=_DNS_LABEL)
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
    secret_name = fields.String(required=True, validate=_DNS_LABEL)
    secret_key = fields.String(
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


class LabVolumeSchema(StrictCamelCaseSchema):
    name = fields.String(required=True, validate=_DNS_LABEL)
    type = fields.String(required=True, validate=validate.OneOf(sorted(_VOLUME_SOURCES)))
    path = fields.String(load_default=None, validate=_ABSOLUTE_PATH)
    server = fields.String(load_default=None)
    claim_name = fields.String(load_default=None, validate=_DNS_LABEL)
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
    mount_path = fields.String(required=True, validate=_ABSOLUTE_PATH)
    sub_path = fields.String(load_default=None)
    read_only = fields.Boolean(load_default=False)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> LabVolumeMount:
        return LabVolumeMount(**data)


class InitContainerSchema(StrictCamelCaseSchema):
    name = fields.String(required=True, validate=_DNS_LABEL)
    image = fields.String(required=True, validate=validate.Length(min=1))
    privileged = fields.Boolean(load_default=False)
    command = fields.List(fields.String(), load_default=list)
    args = fields.List(fields.String(), load_default=list)
    volume_mounts = fields.List(fields.Nested(LabVolumeMountSchema), load_default=list)
    env = fields.Dict(
        keys=fields.String(validate=_ENV_NAME),
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
    ingress_namespaces = fields.List(fields.String(validate=_DNS_LABEL), load_default=list)

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
        keys=fields.String(validate=_ENV_NAME), values=fields.String(), load_default=dict
    )
    secrets = fields.List(fields.Nested(CopiedSecretSchema), load_default=list)
    pull_secret = fields.String(load_default=None, validate=_DNS_LABEL)
    secrets_path = fields.String(load_default="/opt/lab/secrets", validate=_ABSOLUTE_PATH)
    volumes = fields.List(fields.Nested(LabVolumeSchema), load_default=list)
    volume_mounts = fields.List(fields.Nested(LabVolumeMountSchema), load_default=list)
    init_containers = fields.List(fields.Nested(InitContainerSchema), load_default=list)
    node_selector = fields.Dict(keys=fields.String(), values=fields.String(), load_default=dict)
    tolerations = fields.List(fields.Nested(TolerationSchema), load_default=list)
    command = fields.List(fields.String(), load_default=list)
    args = fields.List(fields.String(), load_default=list)
    port = fields.Integer(load_default=8888, validate=validate.Range(min=1, max=65535))
    internal_url = fields.String(load_default=DEFAULT_TEMPLATE, validate=_url_template)
    spawn_timeout = fields.Float(load_default=600.0, validate=_POSITIVE)
    delete_timeout = fields.Float(load_default=300.0, validate=_POSITIVE)
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


_REGISTRY_HOST = validate.Regexp(
    r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$",
    error="must be a registry host, optionally with :port (no scheme, no path)",
)
_REPOSITORY = validate.Regexp(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$",
    error="must be a repository path of lowercase letters, digits, '.', '_', '-' and '/'",
)
_PATH_COMPONENT = validate.Regexp(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$",
    error="must be lowercase letters, digits, '.', '_' and '-'",
)
_TAG = validate.Regexp(
    r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", error="must be an image tag (at most 128 characters)"
)
_DIGEST = validate.Regexp(r"^sha256:[0-9a-f]{64}$", error="must be sha256:<64 hex digits>")
_TAGGED_REFERENCE = validate.Regexp(
    r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?"
    r"/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r":[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$",
    error="must be <registry>/<repository>:<tag>",
)
_SOURCE_KEYS = {
    SourceType.RUBIN: ("registry", "docker"),
    SourceType.RUBIN_GAR: ("gar",),
    SourceType.SIMPLE: ("images",),
}
_REGISTRY_KEYS = (
    "registry",
    "docker",
    "gar",
    "recommendedTag",
    "numReleases",
    "numWeeklies",
    "numDailies",
    "cycle",
    "aliasTags",
)


class DockerSourceSchema(StrictCamelCaseSchema):
    repository = fields.String(required=True, validate=_REPOSITORY)


class GarSourceSchema(StrictCamelCaseSchema):
    repository = fields.String(required=True, validate=_PATH_COMPONENT)
    image = fields.String(required=True, validate=_PATH_COMPONENT)
    project_id = fields.String(required=True, validate=_PATH_COMPONENT)
    location = fields.String(required=True, validate=_PATH_COMPONENT)


class SimpleImageSchema(StrictCamelCaseSchema):
    url = fields.String(required=True, validate=_TAGGED_REFERENCE)
    name = fields.String(required=True, validate=validate.Length(min=1, max=200))
    digest = fields.String(load_default=None, validate=_DIGEST)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> SimpleImage:
        return SimpleImage(**data)


class ImageValidationSchema(StrictCamelCaseSchema):
    command = fields.List(
        fields.String(validate=validate.Length(min=1)),
        required=True,
        validate=validate.Length(min=1),
        metadata={"description": "What runs in the image under test; exit 0 passes."},
    )
    timeout_seconds = fields.Float(load_default=300.0, validate=_POSITIVE)
    size = fields.String(load_default="small", validate=validate.Length(min=1))
    nodes = fields.Integer(load_default=1, validate=validate.Range(min=1, max=20))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> ImageValidation:
        return ImageValidation(
            command=tuple(data["command"]),
            timeout=data["timeout_seconds"],
            size=data["size"],
            nodes=data["nodes"],
        )


class PrepullSchema(StrictCamelCaseSchema):
    """A DMTN-222 prepull block: a source of lab images and which of them to prepull."""

    name = fields.String(required=True, validate=_DNS_LABEL)
    type = fields.Enum(SourceType, by_value=True, required=True)
    registry = fields.String(load_default=None, validate=_REGISTRY_HOST)
    docker = fields.Nested(DockerSourceSchema, load_default=None)
    gar = fields.Nested(GarSourceSchema, load_default=None)
    recommended_tag = fields.String(load_default=None, validate=_TAG)
    num_releases = fields.Integer(load_default=1, validate=validate.Range(min=0, max=100))
    num_weeklies = fields.Integer(load_default=2, validate=validate.Range(min=0, max=100))
    num_dailies = fields.Integer(load_default=3, validate=validate.Range(min=0, max=100))
    cycle = fields.Integer(load_default=None, validate=validate.Range(min=0))
    alias_tags = fields.List(fields.String(validate=_TAG), load_default=list)
    images = fields.List(fields.Nested(SimpleImageSchema), load_default=list)
    groups = fields.List(fields.String(validate=validate.Length(min=1)), load_default=list)
    validation = fields.Nested(ImageValidationSchema, load_default=None, allow_none=True)
    retention = fields.Integer(load_default=2, validate=validate.Range(min=1, max=100))

    @validates_schema(pass_original=True)
    def _fields_of_type(self, data: dict[str, Any], original: Any, **_: Any) -> None:
        kind = data.get("type")
        if kind is None or not isinstance(original, dict):
            return
        for key in _SOURCE_KEYS[kind]:
            if not data.get(key):
                raise ValidationError(f"required for type {kind.value}", key)
        unused: tuple[str, ...] = _REGISTRY_KEYS if kind is SourceType.SIMPLE else ("images",)
        if kind is SourceType.RUBIN:
            unused = ("gar", "images")
        elif kind is SourceType.RUBIN_GAR:
            unused = ("docker", "images")
        for key in unused:
            if key in original:
                raise ValidationError(f"not used by type {kind.value}", key)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> PrepullConfig:
        kind: SourceType = data["type"]
        registry, repository = data["registry"], None
        if kind is SourceType.RUBIN:
            repository = data["docker"]["repository"]
        elif kind is SourceType.RUBIN_GAR:
            gar = data["gar"]
            registry = registry or f"{gar['location']}-docker.pkg.dev"
            repository = f"{gar['project_id']}/{gar['repository']}/{gar['image']}"
        return PrepullConfig(
            name=data["name"],
            type=kind,
            registry=registry,
            repository=repository,
            recommended_tag=data["recommended_tag"],
            num_releases=data["num_releases"],
            num_weeklies=data["num_weeklies"],
            num_dailies=data["num_dailies"],
            cycle=data["cycle"],
            alias_tags=tuple(data["alias_tags"]),
            images=tuple(data["images"]),
            groups=tuple(data["groups"]),
            document=_document(data, registry),
            validation=data["validation"],
            retention=data["retention"],
        )


def _document(data: dict[str, Any], registry: str | None) -> dict[str, Any]:
    """The block as an operator wrote it (camelCase), with defaults filled in."""
    kind: SourceType = data["type"]
    document: dict[str, Any] = {"name": data["name"], "type": kind.value}
    if kind is SourceType.SIMPLE:
        document["images"] = [
            {"url": i.url, "name": i.name, **({"digest": i.digest} if i.digest else {})}
            for i in data["images"]
        ]
    else:
        document["registry"] = registry
        if kind is SourceType.RUBIN:
            document["docker"] = {"repository": data["docker"]["repository"]}
        else:
            gar = data["gar"]
            document["gar"] = {
                "repository": gar["repository"],
                "image": gar["image"],
                "projectId": gar["project_id"],
                "location": gar["location"],
            }
        for key in ("recommended_tag", "num_releases", "num_weeklies", "num_dailies", "cycle"):
            if data[key] is not None:
                document[camel_case(key)] = data[key]
        if data["alias_tags"]:
            document["aliasTags"] = list(data["alias_tags"])
    if data["groups"]:
        document["groups"] = list(data["groups"])
    validation: ImageValidation | None = data["validation"]
    if validation is not None:
        document["validation"] = {
            "command": list(validation.command),
            "timeoutSeconds": validation.timeout,
            "size": validation.size,
            "nodes": validation.nodes,
        }
    document["retention"] = data["retention"]
    return document


class ImagesSchema(StrictCamelCaseSchema):
    refresh_seconds = fields.Float(load_default=300.0, validate=validate.Range(min=1))
    lease_seconds = fields.Float(load_default=10.0, validate=validate.Range(min=1))
    request_timeout = fields.Float(load_default=5.0, validate=_POSITIVE)
    credentials_secret = fields.String(load_default=None, validate=_DNS_LABEL)
    insecure_registries = fields.List(fields.String(validate=_REGISTRY_HOST), load_default=list)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> ImagesConfig:
        return ImagesConfig(
            refresh_seconds=data["refresh_seconds"],
            lease_seconds=data["lease_seconds"],
            request_timeout=data["request_timeout"],
            credentials_secret=data["credentials_secret"],
            insecure_registries=tuple(data["insecure_registries"]),
        )


class PrepullerSchema(StrictCamelCaseSchema):
    enabled = fields.Boolean(load_default=True)
    interval_seconds = fields.Float(load_default=10.0, validate=validate.Range(min=0.05))
    lease_seconds = fields.Float(load_default=10.0, validate=validate.Range(min=1))
    pulls_per_node = fields.Integer(load_default=1, validate=validate.Range(min=1, max=100))
    max_pulls = fields.Integer(load_default=20, validate=validate.Range(min=1, max=10000))
    pull_timeout = fields.Float(load_default=900.0, validate=_POSITIVE)
    retry_seconds = fields.Float(load_default=60.0, validate=_POSITIVE)
    max_retry_seconds = fields.Float(load_default=1800.0, validate=_POSITIVE)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> PrepullerConfig:
        return PrepullerConfig(**data)


class OperationsSchema(StrictCamelCaseSchema):
    lease_seconds = fields.Float(load_default=10.0, validate=validate.Range(min=1))
    scan_seconds = fields.Float(load_default=2.0, validate=validate.Range(min=0.1))
    keepalive_seconds = fields.Float(load_default=15.0, validate=validate.Range(min=0.1))
    max_concurrent = fields.Integer(load_default=32, validate=validate.Range(min=1, max=10000))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> OperationsConfig:
        return OperationsConfig(**data)


class WatcherSchema(StrictCamelCaseSchema):
    lease_seconds = fields.Float(load_default=10.0, validate=validate.Range(min=1))
    watch_seconds = fields.Integer(load_default=60, validate=validate.Range(min=1, max=3600))
    reconcile_seconds = fields.Float(load_default=60.0, validate=validate.Range(min=0.1))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> WatcherConfig:
        return WatcherConfig(**data)


class LimitsSchema(StrictCamelCaseSchema):
    max_body_bytes = fields.Integer(
        load_default=1024 * 1024, validate=validate.Range(min=1024, max=64 * 1024 * 1024)
    )
    streams_per_user = fields.Integer(load_default=20, validate=validate.Range(min=1))
    mutations_per_minute = fields.Integer(load_default=30, validate=validate.Range(min=1))
    streams_per_worker = fields.Integer(load_default=2000, validate=validate.Range(min=1))
    group_mutations_per_minute = fields.Integer(load_default=0, validate=validate.Range(min=0))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> LimitsConfig:
        return LimitsConfig(**data)


class AdmissionSchema(StrictCamelCaseSchema):
    max_in_progress = fields.Integer(load_default=0, validate=validate.Range(min=0, max=100000))
    max_waiting = fields.Integer(load_default=1000, validate=validate.Range(min=1, max=100000))
    groups = fields.List(
        fields.String(validate=validate.Regexp(r"^[^\s]+$", error="a group name, no spaces")),
        load_default=list,
    )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> AdmissionConfig:
        return AdmissionConfig(
            max_in_progress=data["max_in_progress"],
            max_waiting=data["max_waiting"],
            groups=tuple(data["groups"]),
        )


_SCOPE = validate.Regexp(r"^[a-z]+:[a-z][-a-z]*$", error="must be a scope like admin:lab-pods")


class AdminPodSchema(StrictCamelCaseSchema):
    image = fields.String(load_default=None, validate=validate.Length(min=1))
    scope = fields.String(load_default=DEFAULT_ADMIN_POD_SCOPE, validate=_SCOPE)
    namespace = fields.String(load_default="fsadmin", validate=_DNS_LABEL)
    name = fields.String(load_default="fsadmin", validate=_DNS_LABEL)
    mount_prefix = fields.String(load_default="/mnt", validate=_ABSOLUTE_PATH)
    volumes = fields.List(fields.String(validate=_DNS_LABEL), load_default=list)
    command = fields.List(fields.String(), load_default=list)
    args = fields.List(fields.String(), load_default=list)
    cpu = CpuField(load_default=1.0)
    memory = MemoryField(load_default=2 * 2**30)
    node_selector = fields.Dict(keys=fields.String(), values=fields.String(), load_default=dict)
    tolerations = fields.List(fields.Nested(TolerationSchema), load_default=list)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> AdminPodConfig:
        return AdminPodConfig(
            **{
                **data,
                "volumes": tuple(data["volumes"]),
                "command": tuple(data["command"]),
                "args": tuple(data["args"]),
                "tolerations": tuple(data["tolerations"]),
            }
        )


class AdminSchema(StrictCamelCaseSchema):
    audit_length = fields.Integer(load_default=1000, validate=validate.Range(min=1, max=100000))
    drop_failed_labs_after_seconds = fields.Float(
        load_default=7 * 86400.0, validate=validate.Range(min=0)
    )
    pod = fields.Nested(AdminPodSchema, load_default=lambda: AdminPodSchema().load({}))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> AdminConfig:
        return AdminConfig(**data)


_LABEL_VALUE = validate.And(
    validate.Length(min=1, max=63),
    validate.Regexp(
        r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
        error="must be a label value: letters, digits, '-', '_' and '.', starting and ending "
        "with a letter or digit",
    ),
)
"""A Kubernetes label value (a tier's id and node pool become labels and node selectors)."""


class HardwareTierSchema(StrictCamelCaseSchema):
    name = fields.String(required=True, validate=_DNS_LABEL)
    id = fields.String(load_default=None, validate=_LABEL_VALUE)
    cores = CpuField(required=True)
    cores_limit = CpuField(load_default=None)
    memory = MemoryField(required=True)
    gpus = fields.Integer(load_default=0, validate=validate.Range(min=0))
    node_pool = fields.String(load_default=None, validate=_LABEL_VALUE)
    kinds = fields.List(fields.String(validate=validate.OneOf(sorted(ADAPTERS))), load_default=list)

    @validates_schema
    def _limit_not_below_request(self, data: dict[str, Any], **_: Any) -> None:
        limit = data.get("cores_limit")
        if limit is not None and limit < data.get("cores", 0):
            raise ValidationError("must not be less than cores", "coresLimit")

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> HardwareTier:
        return HardwareTier(
            name=data["name"],
            id=data["id"] or data["name"],
            cores=data["cores"],
            cores_limit=data["cores_limit"] or data["cores"],
            memory=data["memory"],
            gpus=data["gpus"],
            node_pool=data["node_pool"],
            kinds=tuple(data["kinds"]),
        )


DEFAULT_TIERS = [{"name": "small", "cores": 1, "coresLimit": 2, "memory": "4Gi"}]
"""One modest tier, so that clusters work before an operator describes their hardware."""


REACH_BY = ("dns", "clusterIP")
"""How clusters' addresses name their head Service (``ClustersConfig.reach_by``)."""


class ClustersSchema(StrictCamelCaseSchema):
    kinds = fields.List(
        fields.String(validate=validate.OneOf(sorted(ADAPTERS))),
        load_default=lambda: sorted(ADAPTERS),
    )
    tiers = fields.List(
        fields.Nested(HardwareTierSchema),
        load_default=lambda: [HardwareTierSchema().load(t) for t in DEFAULT_TIERS],
        validate=validate.Length(min=1),
    )
    default_worker_tier = fields.String(load_default=None)
    default_head_tier = fields.String(load_default=None)
    node_pool_label = fields.String(
        load_default="lab-spawner.jupyter.org/node-pool", validate=validate.Length(min=1)
    )
    max_workers = fields.Integer(load_default=32, validate=validate.Range(min=1, max=1000))
    reach_by = fields.String(
        load_default=REACH_BY[0],
        validate=validate.OneOf(REACH_BY),
        metadata={"description": "How addresses name the head Service: its DNS name or IP."},
    )

    @validates_schema
    def _tiers(self, data: dict[str, Any], **_: Any) -> None:
        names = [tier.name for tier in data.get("tiers") or []]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValidationError(f"duplicate names: {', '.join(duplicates)}", "tiers")
        for key in ("default_worker_tier", "default_head_tier"):
            if data.get(key) is not None and data[key] not in names:
                raise ValidationError(f"not a tier; tiers are: {', '.join(names)}", camel_case(key))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> ClustersConfig:
        first = data["tiers"][0].name
        return ClustersConfig(
            kinds=tuple(data["kinds"]),
            tiers=tuple(data["tiers"]),
            default_worker_tier=data["default_worker_tier"] or first,
            default_head_tier=data["default_head_tier"] or first,
            node_pool_label=data["node_pool_label"],
            max_workers=data["max_workers"],
            reach_by=data["reach_by"],
        )


class BudgetSchema(StrictCamelCaseSchema):
    clusters = fields.Integer(load_default=1, validate=validate.Range(min=0))
    workers = fields.Integer(load_default=4, validate=validate.Range(min=0))
    kernels = fields.Integer(load_default=4, validate=validate.Range(min=0))
    cpu = fields.Float(load_default=8.0, validate=validate.Range(min=0))
    memory = MemoryField(load_default=32 * 2**30)
    gpus = fields.Integer(load_default=0, validate=validate.Range(min=0))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> Budget:
        return Budget(**data)


class GroupBudgetSchema(BudgetSchema):
    group = fields.String(required=True, validate=validate.Length(min=1))

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> GroupBudget:
        group = data.pop("group")
        return GroupBudget(group=group, budget=Budget(**data))


class BudgetsSchema(StrictCamelCaseSchema):
    default = fields.Nested(BudgetSchema, load_default=lambda: BudgetSchema().load({}))
    groups = fields.List(fields.Nested(GroupBudgetSchema), load_default=list)

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> BudgetsConfig:
        return BudgetsConfig(default=data["default"], groups=tuple(data["groups"]))


class ConfigSchema(StrictCamelCaseSchema):
    log_level = fields.String(
        load_default="INFO",
        validate=validate.OneOf(["DEBUG", "INFO", "WARNING", "ERROR"]),
    )
    log_format = fields.String(load_default="json", validate=validate.OneOf(["json", "text"]))
    namespace_prefix = fields.String(load_default="nublado", validate=_DNS_LABEL)
    gafaelfawr = fields.Nested(GafaelfawrSchema, required=True)
    redis = fields.Nested(RedisSchema, load_default=lambda: RedisSchema().load({}))
    kubernetes = fields.Nested(KubernetesSchema, load_default=lambda: KubernetesSchema().load({}))
    lab = fields.Nested(LabSchema, required=True)
    operations = fields.Nested(OperationsSchema, load_default=lambda: OperationsSchema().load({}))
    prepull = fields.List(
        fields.Nested(PrepullSchema), required=True, validate=validate.Length(min=1)
    )
    images = fields.Nested(ImagesSchema, load_default=lambda: ImagesSchema().load({}))
    prepuller = fields.Nested(PrepullerSchema, load_default=lambda: PrepullerSchema().load({}))
    watcher = fields.Nested(WatcherSchema, load_default=lambda: WatcherSchema().load({}))
    limits = fields.Nested(LimitsSchema, load_default=lambda: LimitsSchema().load({}))
    admission = fields.Nested(AdmissionSchema, load_default=lambda: AdmissionSchema().load({}))
    clusters = fields.Nested(ClustersSchema, load_default=lambda: ClustersSchema().load({}))
    budgets = fields.Nested(BudgetsSchema, load_default=lambda: BudgetsSchema().load({}))
    apps = fields.Nested(AppsSchema, load_default=lambda: AppsSchema().load({}))
    admin = fields.Nested(AdminSchema, load_default=lambda: AdminSchema().load({}))

    @validates_schema
    def _unique_prepull_names(self, data: dict[str, Any], **_: Any) -> None:
        names = [block.name for block in data.get("prepull") or []]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValidationError(f"duplicate names: {', '.join(duplicates)}", "prepull")

    @validates_schema
    def _validation_sizes(self, data: dict[str, Any], **_: Any) -> None:
        """A validation's size is a lab size, or a hardware tier not kept to some kinds of
        cluster: checked here, where both lists are known."""
        lab, clusters = data.get("lab"), data.get("clusters")
        if lab is None or clusters is None:
            return
        known = {s.name for s in lab.sizes} | {t.name for t in clusters.tiers if not t.kinds}
        for index, block in enumerate(data.get("prepull") or []):
            if block.validation is not None and block.validation.size not in known:
                raise ValidationError(
                    f"not a lab size or hardware tier; sizes are: {', '.join(sorted(known))}",
                    f"prepull.{index}.validation.size",
                )

    @validates_schema
    def _admin_pod_volumes(self, data: dict[str, Any], **_: Any) -> None:
        """The admin pod mounts lab volumes: checked here, where both are known."""
        lab, admin = data.get("lab"), data.get("admin")
        if lab is None or admin is None:
            return
        known = {v.name for v in lab.volumes}
        unknown = sorted(set(admin.pod.volumes) - known)
        if unknown:
            raise ValidationError(f"not in lab.volumes: {', '.join(unknown)}", "admin.pod.volumes")

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> Config:
        data["prepull"] = tuple(data["prepull"])
        return Config(**data)

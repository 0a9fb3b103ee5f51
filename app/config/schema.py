"""Schema of the service's YAML configuration.

Keys are camelCase, as in the Helm values they are rendered from. Unknown keys are rejected at
every level so a typo in a deployment fails loudly at start-up instead of being ignored.

The sections here are the service's own (Gafaelfawr, Redis, Kubernetes, operations, the
watcher, limits, admission, administration, budgets); the kinds' sections are in their
packages' ``config.py``, and the root schema is composed of both, the kinds' from the one
list ``app.workloads.config_sections.KIND_SECTIONS``.
"""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, validate, validates_schema

from app.config_fields import (
    ABSOLUTE_PATH,
    DNS_LABEL,
    POSITIVE,
    ConfigModelSchema,
    CpuField,
    GroupSettingsSchema,
    MemoryField,
)
from app.models.config import (
    DEFAULT_ADMIN_POD_SCOPE,
    AdminConfig,
    AdminPodConfig,
    AdmissionConfig,
    Budget,
    BudgetsConfig,
    Config,
    GafaelfawrConfig,
    GroupBudget,
    KubernetesConfig,
    LimitsConfig,
    OperationsConfig,
    RedisConfig,
    RedisSentinelConfig,
    WatcherConfig,
)
from app.workloads.config_sections import KIND_CHECKS, KIND_SECTIONS
from app.workloads.lab.config import PodPlacementSchema


class GafaelfawrSchema(ConfigModelSchema):
    model = GafaelfawrConfig

    url = fields.Url(required=True, require_tld=False, schemes={"http", "https"})
    timeout = fields.Float(load_default=3.0, validate=POSITIVE)
    cache_seconds = fields.Integer(load_default=30, validate=validate.Range(min=0, max=3600))

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "url": data["url"].rstrip("/")}


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


class RedisSentinelSchema(ConfigModelSchema):
    model = RedisSentinelConfig

    addresses = fields.List(AddressField(), required=True, validate=validate.Length(min=1))
    service_name = fields.String(load_default="mymaster", validate=validate.Length(min=1))
    db = fields.Integer(load_default=0, validate=validate.Range(min=0))
    username = fields.String(load_default=None, validate=validate.Length(min=1))
    sentinel_username = fields.String(load_default=None, validate=validate.Length(min=1))

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        # The password is read from the environment by the loader, never from the file.
        return {**data, "sentinel_password": None}


class RedisSchema(ConfigModelSchema):
    model = RedisConfig

    url = fields.String(load_default=None, validate=validate.Length(min=1))
    sentinel = fields.Nested(RedisSentinelSchema, load_default=None)
    key_prefix = fields.String(load_default="spawner:")
    socket_timeout = fields.Float(load_default=2.0, validate=POSITIVE)
    socket_connect_timeout = fields.Float(load_default=1.0, validate=POSITIVE)
    max_connections = fields.Integer(load_default=1000, validate=validate.Range(min=1))

    @validates_schema
    def _one_address(self, data: dict[str, Any], **_: Any) -> None:
        if data.get("url") is not None and data.get("sentinel") is not None:
            raise ValidationError(
                "give either url (one Redis server) or sentinel (Redis Sentinel), not both",
                "sentinel",
            )

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        if data["url"] is None and data["sentinel"] is None:
            data["url"] = DEFAULT_REDIS_URL
        # The password is read from the environment by the loader, never from the file.
        return {**data, "password": None}


class KubernetesSchema(ConfigModelSchema):
    model = KubernetesConfig

    mode = fields.String(
        load_default="auto",
        validate=validate.OneOf(["auto", "in-cluster", "kubeconfig", "host"]),
    )
    host = fields.Url(load_default=None, require_tld=False, schemes={"http", "https"})
    kubeconfig = fields.String(load_default=None)
    request_timeout = fields.Float(load_default=10.0, validate=POSITIVE)
    service_namespace = fields.String(load_default="nublado", validate=DNS_LABEL)
    certificate_authority = fields.String(load_default=None, validate=validate.Length(min=1))


class OperationsSchema(ConfigModelSchema):
    model = OperationsConfig

    lease_seconds = fields.Float(load_default=10.0, validate=validate.Range(min=1))
    scan_seconds = fields.Float(load_default=2.0, validate=validate.Range(min=0.1))
    keepalive_seconds = fields.Float(load_default=15.0, validate=validate.Range(min=0.1))
    max_concurrent = fields.Integer(load_default=32, validate=validate.Range(min=1, max=10000))


class WatcherSchema(ConfigModelSchema):
    model = WatcherConfig

    lease_seconds = fields.Float(load_default=10.0, validate=validate.Range(min=1))
    watch_seconds = fields.Integer(load_default=60, validate=validate.Range(min=1, max=3600))
    reconcile_seconds = fields.Float(load_default=60.0, validate=validate.Range(min=0.1))


class LimitsSchema(ConfigModelSchema):
    model = LimitsConfig

    max_body_bytes = fields.Integer(
        load_default=1024 * 1024, validate=validate.Range(min=1024, max=64 * 1024 * 1024)
    )
    streams_per_user = fields.Integer(load_default=20, validate=validate.Range(min=1))
    mutations_per_minute = fields.Integer(load_default=30, validate=validate.Range(min=1))
    streams_per_worker = fields.Integer(load_default=2000, validate=validate.Range(min=1))
    group_mutations_per_minute = fields.Integer(load_default=0, validate=validate.Range(min=0))


class AdmissionSchema(ConfigModelSchema):
    model = AdmissionConfig

    max_in_progress = fields.Integer(load_default=0, validate=validate.Range(min=0, max=100000))
    max_waiting = fields.Integer(load_default=1000, validate=validate.Range(min=1, max=100000))
    groups = fields.List(
        fields.String(validate=validate.Regexp(r"^[^\s]+$", error="a group name, no spaces")),
        load_default=list,
    )


_SCOPE = validate.Regexp(r"^[a-z]+:[a-z][-a-z]*$", error="must be a scope like admin:lab-pods")


class AdminPodSchema(PodPlacementSchema, ConfigModelSchema):
    model = AdminPodConfig

    image = fields.String(load_default=None, validate=validate.Length(min=1))
    scope = fields.String(load_default=DEFAULT_ADMIN_POD_SCOPE, validate=_SCOPE)
    namespace = fields.String(load_default="fsadmin", validate=DNS_LABEL)
    name = fields.String(load_default="fsadmin", validate=DNS_LABEL)
    mount_prefix = fields.String(load_default="/mnt", validate=ABSOLUTE_PATH)
    volumes = fields.List(fields.String(validate=DNS_LABEL), load_default=list)
    command = fields.List(fields.String(), load_default=list)
    args = fields.List(fields.String(), load_default=list)
    cpu = CpuField(load_default=1.0)
    memory = MemoryField(load_default=2 * 2**30)


class AdminSchema(ConfigModelSchema):
    model = AdminConfig

    audit_length = fields.Integer(load_default=1000, validate=validate.Range(min=1, max=100000))
    drop_failed_labs_after_seconds = fields.Float(
        load_default=7 * 86400.0, validate=validate.Range(min=0)
    )
    pod = fields.Nested(AdminPodSchema, load_default=lambda: AdminPodSchema().load({}))


class BudgetSchema(ConfigModelSchema):
    model = Budget

    clusters = fields.Integer(load_default=1, validate=validate.Range(min=0))
    workers = fields.Integer(load_default=4, validate=validate.Range(min=0))
    kernels = fields.Integer(load_default=4, validate=validate.Range(min=0))
    cpu = fields.Float(load_default=8.0, validate=validate.Range(min=0))
    memory = MemoryField(load_default=32 * 2**30)
    gpus = fields.Integer(load_default=0, validate=validate.Range(min=0))


class GroupBudgetSchema(GroupSettingsSchema, BudgetSchema):
    group_model = GroupBudget


class BudgetsSchema(ConfigModelSchema):
    model = BudgetsConfig

    default = fields.Nested(BudgetSchema, load_default=lambda: BudgetSchema().load({}))
    groups = fields.List(fields.Nested(GroupBudgetSchema), load_default=list)


class ServiceConfigSchema(ConfigModelSchema):
    """The root's own keys, and the rules between sections; ``ConfigSchema`` adds the kinds'
    sections to it."""

    model = Config

    log_level = fields.String(
        load_default="INFO",
        validate=validate.OneOf(["DEBUG", "INFO", "WARNING", "ERROR"]),
    )
    log_format = fields.String(load_default="json", validate=validate.OneOf(["json", "text"]))
    namespace_prefix = fields.String(load_default="nublado", validate=DNS_LABEL)
    gafaelfawr = fields.Nested(GafaelfawrSchema, required=True)
    redis = fields.Nested(RedisSchema, load_default=lambda: RedisSchema().load({}))
    kubernetes = fields.Nested(KubernetesSchema, load_default=lambda: KubernetesSchema().load({}))
    operations = fields.Nested(OperationsSchema, load_default=lambda: OperationsSchema().load({}))
    watcher = fields.Nested(WatcherSchema, load_default=lambda: WatcherSchema().load({}))
    limits = fields.Nested(LimitsSchema, load_default=lambda: LimitsSchema().load({}))
    admission = fields.Nested(AdmissionSchema, load_default=lambda: AdmissionSchema().load({}))
    budgets = fields.Nested(BudgetsSchema, load_default=lambda: BudgetsSchema().load({}))
    admin = fields.Nested(AdminSchema, load_default=lambda: AdminSchema().load({}))

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
    def _kinds_checks(self, data: dict[str, Any], **_: Any) -> None:
        """The rules between a kind's section and the others (a mount names a lab volume)."""
        for check in KIND_CHECKS:
            check(data)

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        """The kinds' sections whose models live in their packages go in ``sections``."""
        own = Config.__dataclass_fields__
        sections = {key: data[key] for key in data if key not in own}
        return {**{k: v for k, v in data.items() if k in own}, "sections": sections}

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


ConfigSchema = ServiceConfigSchema.from_dict(
    {name: field for sections in KIND_SECTIONS for name, field in sections.items()},
    name="ConfigSchema",
)
"""The whole configuration: the service's own sections and every kind's."""

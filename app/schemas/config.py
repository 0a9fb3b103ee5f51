"""Schema of the service's YAML configuration.

Keys are camelCase, as in the Helm values they are rendered from. Unknown keys are rejected at
every level so a typo in a deployment fails loudly at start-up instead of being ignored.
"""

from __future__ import annotations

from typing import Any

from marshmallow import RAISE, Schema, fields, post_load, validate

from app.config.models import (
    Config,
    GafaelfawrConfig,
    KubernetesConfig,
    RedisConfig,
)

_POSITIVE = validate.Range(min=0, min_inclusive=False)
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
    request_timeout = fields.Float(
        data_key="requestTimeout", load_default=10.0, validate=_POSITIVE
    )
    service_namespace = fields.String(
        data_key="serviceNamespace", load_default="nublado", validate=_DNS_LABEL
    )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> KubernetesConfig:
        return KubernetesConfig(**data)


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
    kubernetes = fields.Nested(
        KubernetesSchema, load_default=lambda: KubernetesSchema().load({})
    )

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> Config:
        return Config(**data)

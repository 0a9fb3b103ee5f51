"""The validated configuration, as typed objects the rest of the service reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GafaelfawrConfig:
    """Where to verify tokens and how long to trust an answer."""

    url: str
    timeout: float
    cache_seconds: int


@dataclass(frozen=True)
class RedisConfig:
    """The shared Redis; ``url`` is overridden by ``SPAWNER_REDIS_URL``."""

    url: str
    key_prefix: str
    socket_timeout: float
    socket_connect_timeout: float
    max_connections: int


@dataclass(frozen=True)
class KubernetesConfig:
    """How to reach the Kubernetes API and how long any one call may take."""

    mode: str
    host: str | None
    kubeconfig: str | None
    request_timeout: float
    service_namespace: str


@dataclass(frozen=True)
class Config:
    """The whole service configuration."""

    log_level: str
    namespace_prefix: str
    gafaelfawr: GafaelfawrConfig
    redis: RedisConfig
    kubernetes: KubernetesConfig

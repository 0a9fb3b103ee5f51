"""Loading and validating the service configuration."""

from app.config.loader import (
    CONFIG_PATH_ENV,
    REDIS_PASSWORD_ENV,
    REDIS_SENTINEL_PASSWORD_ENV,
    REDIS_URL_ENV,
    ConfigError,
    default_config_path,
    load_config,
    parse_config,
)
from app.models.config import (
    Config,
    GafaelfawrConfig,
    KubernetesConfig,
    RedisConfig,
    RedisSentinelConfig,
)

__all__ = [
    "CONFIG_PATH_ENV",
    "REDIS_PASSWORD_ENV",
    "REDIS_SENTINEL_PASSWORD_ENV",
    "REDIS_URL_ENV",
    "Config",
    "ConfigError",
    "GafaelfawrConfig",
    "KubernetesConfig",
    "RedisConfig",
    "RedisSentinelConfig",
    "default_config_path",
    "load_config",
    "parse_config",
]

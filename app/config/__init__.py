"""Loading and validating the service configuration."""

from app.config.loader import (
    CONFIG_PATH_ENV,
    REDIS_URL_ENV,
    ConfigError,
    default_config_path,
    load_config,
    parse_config,
)
from app.config.models import Config, GafaelfawrConfig, KubernetesConfig, RedisConfig

__all__ = [
    "CONFIG_PATH_ENV",
    "REDIS_URL_ENV",
    "Config",
    "ConfigError",
    "GafaelfawrConfig",
    "KubernetesConfig",
    "RedisConfig",
    "default_config_path",
    "load_config",
    "parse_config",
]

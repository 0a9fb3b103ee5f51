"""Read the YAML configuration file, apply environment overrides and validate it.

Every problem is reported as ``key.path: message`` so an operator can find the offending
line in the Helm values without reading a traceback.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from marshmallow import ValidationError

from app.config.schema import ConfigSchema
from app.models.config import Config, RedisConfig

CONFIG_PATH_ENV = "SPAWNER_CONFIG_PATH"
"""Environment variable naming the configuration file."""

REDIS_URL_ENV = "SPAWNER_REDIS_URL"
"""Environment variable that overrides ``redis.url`` (it often carries a password); set, it
replaces a ``redis.sentinel`` block too."""

REDIS_PASSWORD_ENV = "SPAWNER_REDIS_PASSWORD"  # noqa: S105 (a variable's name)
"""Environment variable holding the Redis servers' password (with a URL, one the URL does not
carry already; with Sentinel, the primary's and replicas')."""

REDIS_SENTINEL_PASSWORD_ENV = "SPAWNER_REDIS_SENTINEL_PASSWORD"  # noqa: S105 (a name)
"""Environment variable holding the sentinels' own password, when they require one."""


class ConfigError(Exception):
    """The configuration cannot be used; the message lists every problem found."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        listing = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"invalid configuration in {source}:\n{listing}")


def default_config_path() -> Path:
    """The bundled demo configuration, used when no path is given."""
    return Path(__file__).with_name("demo.yaml")


def _flatten(messages: Any, prefix: str = "") -> list[str]:
    """Turn marshmallow's nested error dict into sorted ``path: message`` lines."""
    if isinstance(messages, Mapping):
        lines: list[str] = []
        for key, value in messages.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(key, int) and prefix:
                path = f"{prefix}[{key}]"
            lines.extend(_flatten(value, path))
        return sorted(lines)
    if isinstance(messages, list) and all(isinstance(m, str) for m in messages):
        text = "; ".join(messages)
        return [f"{prefix}: {text}" if prefix else text]
    if isinstance(messages, list):
        return [line for m in messages for line in _flatten(m, prefix)]
    return [f"{prefix}: {messages}" if prefix else str(messages)]


def parse_config(raw: Any, source: str = "<config>") -> Config:
    """Validate an already-parsed YAML document."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(source, ["(top level): must be a mapping of keys to values"])
    try:
        config: Config = ConfigSchema().load(raw)
    except ValidationError as exc:
        raise ConfigError(source, _flatten(exc.messages)) from None
    return dataclasses.replace(config, redis=_redis_from_environment(config.redis))


def _redis_from_environment(redis: RedisConfig) -> RedisConfig:
    """The address and passwords the environment gives: a Secret fills these in a
    deployment, so no password has to be written into the configuration file."""
    url = os.environ.get(REDIS_URL_ENV)
    if url:
        redis = dataclasses.replace(redis, url=url, sentinel=None)
    sentinel_password = os.environ.get(REDIS_SENTINEL_PASSWORD_ENV)
    if redis.sentinel is not None and sentinel_password:
        sentinel = dataclasses.replace(redis.sentinel, sentinel_password=sentinel_password)
        redis = dataclasses.replace(redis, sentinel=sentinel)
    return dataclasses.replace(redis, password=os.environ.get(REDIS_PASSWORD_ENV) or None)


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Load the configuration from ``path``, ``$SPAWNER_CONFIG_PATH`` or the demo file."""
    chosen = Path(path or os.environ.get(CONFIG_PATH_ENV) or default_config_path())
    try:
        text = chosen.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(chosen), [f"(file): cannot be read: {exc.strerror}"]) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(str(chosen), [f"{where}: not valid YAML: {problem}"]) from None
    return parse_config(raw, str(chosen))

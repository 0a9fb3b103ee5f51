"""The file server's settings, read from the environment (the variables are described in the
package's docstring). Everything is checked before the server starts, so that a Job given a
configuration it cannot serve fails at once, naming the variable, rather than later."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_PORT = 8000
DEFAULT_HOST = "0.0.0.0"
DEFAULT_IDLE_TIMEOUT = 3600.0

_USERNAME = re.compile(r"[a-z0-9](?:[a-z0-9]|-[a-z0-9])*")
"""A username as Gafaelfawr and the service accept it; it needs no quoting in a URL."""

_MOUNT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
"""A mount's URL segment: no quoting needed, and never ``.`` or ``..``. Lowercase, as the
prefix's segments: wsgidav matches a request to its share in lowercase, so a share named with
a capital letter would never be found."""

_PREFIX_SEGMENT = re.compile(r"[a-z0-9._~-]+")

_MOUNT_KEYS = {"name", "path", "readOnly"}


class ConfigError(Exception):
    """The environment does not describe a file server that can run; the message names the
    variable and what is wrong with it."""


@dataclass(frozen=True)
class Mount:
    """A directory served at ``<prefix>/<name>/``."""

    name: str
    path: Path
    read_only: bool


@dataclass(frozen=True)
class Settings:
    user: str
    prefix: str
    """The URL path served, starting and not ending with ``/`` (``/files/rachel``)."""
    host: str
    port: int
    mounts: tuple[Mount, ...]
    idle_timeout: float
    """Seconds without a request after which the server exits."""


def settings_from(environ: Mapping[str, str]) -> Settings:
    """The settings the environment describes; ``ConfigError`` if they cannot be used."""
    user = _required(environ, "FILESERVER_USER")
    if not _USERNAME.fullmatch(user):
        raise ConfigError(f"FILESERVER_USER: {user!r} is not a username")
    return Settings(
        user=user,
        prefix=_prefix(environ.get("FILESERVER_URL_PREFIX", f"/files/{user}")),
        host=environ.get("FILESERVER_HOST", DEFAULT_HOST),
        port=_port(environ.get("FILESERVER_PORT", str(DEFAULT_PORT))),
        mounts=_mounts(_required(environ, "FILESERVER_MOUNTS")),
        idle_timeout=_idle_timeout(
            environ.get("FILESERVER_IDLE_TIMEOUT", str(DEFAULT_IDLE_TIMEOUT))
        ),
    )


def _required(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name, "")
    if not value:
        raise ConfigError(f"{name} is not set")
    return value


def _prefix(text: str) -> str:
    segments = text.strip("/").split("/")
    if not text.startswith("/") or not all(_PREFIX_SEGMENT.fullmatch(s) for s in segments):
        raise ConfigError(
            f"FILESERVER_URL_PREFIX: {text!r} is not an absolute path of lowercase segments"
        )
    if any(s in (".", "..") for s in segments):
        raise ConfigError(f"FILESERVER_URL_PREFIX: {text!r} has a '.' or '..' segment")
    return "/" + "/".join(segments)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise ConfigError(f"FILESERVER_PORT: {text!r} is not a number") from None
    if not 1 <= port <= 65535:
        raise ConfigError(f"FILESERVER_PORT: {port} is not a TCP port (1 to 65535)")
    return port


def _idle_timeout(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise ConfigError(f"FILESERVER_IDLE_TIMEOUT: {text!r} is not a number") from None
    if not 0 < seconds < float("inf"):
        raise ConfigError(f"FILESERVER_IDLE_TIMEOUT: {text!r} is not a positive number")
    return seconds


def _mounts(text: str) -> tuple[Mount, ...]:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"FILESERVER_MOUNTS: not JSON ({error})") from None
    if not isinstance(items, list) or not items:
        raise ConfigError("FILESERVER_MOUNTS: not a non-empty JSON list of mounts")
    mounts = tuple(_mount(index, item) for index, item in enumerate(items))
    names = [mount.name for mount in mounts]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"FILESERVER_MOUNTS: the name {name!r} is used twice")
    return mounts


def _mount(index: int, item: Any) -> Mount:
    where = f"FILESERVER_MOUNTS[{index}]"
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: not a JSON object")
    unknown = sorted(set(item) - _MOUNT_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown} (known: {sorted(_MOUNT_KEYS)})")
    name, path, read_only = item.get("name"), item.get("path"), item.get("readOnly", False)
    if not isinstance(name, str) or not _MOUNT_NAME.fullmatch(name):
        raise ConfigError(
            f"{where}.name: {name!r} is not a name (lowercase letters, digits, . _ -)"
        )
    if not isinstance(path, str) or not path.startswith("/"):
        raise ConfigError(f"{where}.path: {path!r} is not an absolute path")
    if not Path(path).is_dir():
        raise ConfigError(f"{where}.path: {path} is not a directory")
    if not isinstance(read_only, bool):
        raise ConfigError(f"{where}.readOnly: {read_only!r} is not true or false")
    return Mount(name=name, path=Path(path), read_only=read_only)

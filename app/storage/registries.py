"""One registry client per registry host, with credentials from a Kubernetes Secret.

Credentials live in a ``kubernetes.io/dockerconfigjson`` Secret in the service's namespace
(``images.credentialsSecret``), the same format image pull secrets use, so an operator keeps
one Secret for both. It is re-read at most once a minute, so rotated credentials are picked
up without a restart; a client is rebuilt only when its host's credentials change, keeping its
pooled connections and cached tokens otherwise.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from app.models.config import Config
from app.storage.kubernetes import KubernetesError, KubernetesStorage
from app.storage.registry import RegistryClient

logger = logging.getLogger(__name__)

CREDENTIALS_TTL_SECONDS = 60.0
_CONFIG_KEY = ".dockerconfigjson"


def split_reference(reference: str) -> tuple[str, str, str]:
    """``host[:port]/repository:tag`` as (host, repository, tag); ValueError otherwise."""
    host, slash, rest = reference.partition("/")
    repository, colon, tag = rest.rpartition(":")
    if not slash or not colon or not host or not repository or not tag or "@" in rest:
        raise ValueError(f"not a <registry>/<repository>:<tag> reference: {reference!r}")
    return host, repository, tag


def parse_docker_config(data: dict[str, str]) -> dict[str, tuple[str, str]]:
    """``{host: (username, password)}`` from a dockerconfigjson Secret's ``data``.

    Hosts may be written as URLs (``https://index.docker.io/v1/``); only the host counts.
    Entries that cannot be read are skipped (and named, never their values, in the log).
    """
    encoded = data.get(_CONFIG_KEY)
    if not encoded:
        return {}
    try:
        document = json.loads(base64.b64decode(encoded))
    except (binascii.Error, ValueError):
        logger.warning("registry credentials secret: %s is not base64 JSON", _CONFIG_KEY)
        return {}
    result: dict[str, tuple[str, str]] = {}
    auths = document.get("auths") if isinstance(document, dict) else None
    for key, entry in (auths or {}).items():
        host = str(key).split("://", 1)[-1].split("/", 1)[0]
        credentials = _entry_credentials(entry)
        if credentials is None:
            logger.warning("registry credentials secret: no usable credentials for %s", host)
            continue
        result[host] = credentials
    return result


def _entry_credentials(entry: Any) -> tuple[str, str] | None:
    if not isinstance(entry, dict):
        return None
    if isinstance(entry.get("username"), str) and isinstance(entry.get("password"), str):
        return entry["username"], entry["password"]
    auth = entry.get("auth")
    if isinstance(auth, str):
        try:
            username, colon, password = base64.b64decode(auth).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        if colon:
            return username, password
    return None


class RegistryDirectory:
    """Hands out the `RegistryClient` for a host; shared by the refresher and spawns."""

    def __init__(
        self,
        config: Config,
        kube: KubernetesStorage,
        *,
        client_factory: Callable[..., RegistryClient] = RegistryClient,
    ) -> None:
        self._images = config.images
        self._namespace = config.kubernetes.service_namespace
        self._kube = kube
        self._factory = client_factory
        self._lock = threading.Lock()
        self._clients: dict[str, tuple[tuple[str, str] | None, RegistryClient]] = {}
        self._credentials: dict[str, tuple[str, str]] = {}
        self._read_at = -CREDENTIALS_TTL_SECONDS

    def client(self, host: str) -> RegistryClient:
        credentials = self._credentials_for(host)
        with self._lock:
            known = self._clients.get(host)
            if known is not None and known[0] == credentials:
                return known[1]
            scheme = "http" if host in self._images.insecure_registries else "https"
            client = self._factory(
                f"{scheme}://{host}",
                credentials=credentials,
                timeout=self._images.request_timeout,
            )
            self._clients[host] = (credentials, client)
        if known is not None:
            known[1].close()
        return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, {}
        for _, client in clients.values():
            client.close()

    def _credentials_for(self, host: str) -> tuple[str, str] | None:
        name = self._images.credentials_secret
        if name is None:
            return None
        now = time.monotonic()
        with self._lock:
            fresh = now - self._read_at < CREDENTIALS_TTL_SECONDS
            if fresh:
                return self._credentials.get(host)
        try:
            secret = self._kube.read_secret(self._namespace, name)
        except KubernetesError as exc:
            logger.warning("cannot read registry credentials secret %s: %s", name, exc)
            with self._lock:
                return self._credentials.get(host)
        if secret is None:
            logger.warning("registry credentials secret %s does not exist", name)
        credentials = parse_docker_config((secret or {}).get("data") or {})
        with self._lock:
            self._credentials = credentials
            self._read_at = now
            return credentials.get(host)

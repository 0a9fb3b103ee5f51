"""Gafaelfawr's HTTP API, with answers cached briefly in Redis.

Every worker and replica verifies each request's token. Caching token-info and user-info in
the shared Redis keeps Gafaelfawr's load independent of how often JupyterHub polls. Cache
keys are SHA-256 digests of the token, so Redis never holds a usable credential.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from typing import Any

import redis
import requests
from marshmallow import Schema, ValidationError
from requests.adapters import HTTPAdapter

from app.config import GafaelfawrConfig
from app.errors import AuthenticationError, DependencyUnavailableError
from app.models.identity import TokenData, UserInfo
from app.schemas.gafaelfawr import TokenInfoSchema, UserInfoSchema

logger = logging.getLogger(__name__)

_TOKEN_INFO = "/auth/api/v1/token-info"  # noqa: S105 (a route)
_USER_INFO = "/auth/api/v1/user-info"

LOCAL_CACHE_SECONDS = 5.0
"""How long this process reuses an answer before asking Redis again."""

_LOCAL_CACHE_ENTRIES = 10_000
_STRIPES = 64
_TOKEN_INFO_SCHEMA = TokenInfoSchema()
_USER_INFO_SCHEMA = UserInfoSchema()


class GafaelfawrClient:
    """Verifies tokens and fetches identities."""

    def __init__(
        self,
        config: GafaelfawrConfig,
        redis_client: redis.Redis,
        key_prefix: str,
        session: requests.Session | None = None,
    ) -> None:
        self._config = config
        self._redis = redis_client
        self._prefix = f"{key_prefix}gafaelfawr:"
        if session is None:
            session = requests.Session()
            adapter = HTTPAdapter(pool_connections=4, pool_maxsize=64, max_retries=1)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
        self._session = session
        # A few seconds of memory in front of Redis: JupyterHub polls every lab's status
        # with one token, so most requests then need no Redis round trip for auth.
        self._local: dict[str, tuple[float, Any]] = {}
        self._local_seconds = min(LOCAL_CACHE_SECONDS, float(config.cache_seconds))
        # One fetch per key at a time: without it, every request that misses the cache at
        # the same moment (a burst of streams opening) asks Gafaelfawr itself.
        self._stripes = [threading.Lock() for _ in range(_STRIPES)]

    def token_info(self, token: str) -> TokenData:
        """What the token proves; ``AuthenticationError`` if Gafaelfawr rejects it."""
        result: TokenData = self._fetch("token-info", _TOKEN_INFO, token, _TOKEN_INFO_SCHEMA)
        return result

    def user_info(self, token: str) -> UserInfo:
        """The identity of the token's user: uid, gid, groups and quota."""
        result: UserInfo = self._fetch("user-info", _USER_INFO, token, _USER_INFO_SCHEMA)
        return result

    def _cache_key(self, kind: str, token: str) -> str:
        digest = hashlib.sha256(token.encode()).hexdigest()
        return f"{self._prefix}{kind}:{digest}"

    def _fetch(self, kind: str, path: str, token: str, schema: Schema) -> Any:
        """The parsed answer: from this process's memory, else Redis, else Gafaelfawr.

        The memory holds parsed answers (immutable), so a request that finds one there
        costs a hash and a lookup, not a schema load.
        """
        key = self._cache_key(kind, token)
        found = self._local_get(key)
        if found is not None:
            return found
        with self._stripes[hash(key) % _STRIPES]:
            found = self._local_get(key)
            if found is not None:
                return found
            cached = self._cache_get(key)
            data = json.loads(cached) if cached is not None else self._ask(kind, path, token)
            parsed = self._parse(schema, data, kind)
            if cached is None:
                self._cache_set(key, json.dumps(data))
            self._local_set(key, parsed)
            return parsed

    def _local_get(self, key: str) -> Any:
        entry = self._local.get(key)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def _local_set(self, key: str, data: Any) -> None:
        if self._local_seconds <= 0:
            return
        now = time.monotonic()
        if len(self._local) >= _LOCAL_CACHE_ENTRIES:
            self._local = {k: v for k, v in self._local.items() if v[0] >= now}
            if len(self._local) >= _LOCAL_CACHE_ENTRIES:
                self._local.clear()
        self._local[key] = (now + self._local_seconds, data)

    def _ask(self, kind: str, path: str, token: str) -> Any:
        """Gafaelfawr's own answer, or the error it means for our caller."""
        try:
            response = self._session.get(
                self._config.url + path,
                headers={"Authorization": f"Bearer {token}"},
                timeout=self._config.timeout,
            )
        except requests.RequestException as exc:
            logger.warning("Gafaelfawr %s request failed: %s", kind, type(exc).__name__)
            raise DependencyUnavailableError(
                "cannot verify the token: the authentication service is unavailable"
            ) from None
        if response.status_code in (401, 403):
            raise AuthenticationError("the token is invalid or expired")
        if response.status_code != 200:
            logger.warning("Gafaelfawr %s answered HTTP %d", kind, response.status_code)
            raise DependencyUnavailableError(
                "cannot verify the token: the authentication service answered "
                f"HTTP {response.status_code}"
            )
        try:
            return response.json()
        except ValueError:
            raise DependencyUnavailableError(
                f"the authentication service's {kind} answer is not JSON"
            ) from None

    def _cache_get(self, key: str) -> str | None:
        if self._config.cache_seconds <= 0:
            return None
        try:
            value = self._redis.get(key)
        except redis.RedisError:
            return None
        return value if isinstance(value, str) else None

    def _cache_set(self, key: str, value: str) -> None:
        if self._config.cache_seconds <= 0:
            return
        try:
            self._redis.set(key, value, ex=self._config.cache_seconds)
        except redis.RedisError:
            # The cache is an optimisation; a Redis outage must not turn into auth failures.
            logger.warning("could not cache a Gafaelfawr answer: Redis unavailable")

    @staticmethod
    def _parse(schema: Schema, data: Any, kind: str) -> Any:
        try:
            return schema.load(data)
        except ValidationError as exc:
            raise DependencyUnavailableError(
                f"the authentication service's {kind} answer is malformed: {exc.messages}"
            ) from None

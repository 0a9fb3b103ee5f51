"""Gafaelfawr's HTTP API, with answers cached briefly in Redis.

Every worker and replica verifies each request's token. Caching token-info and user-info in
the shared Redis keeps Gafaelfawr's load independent of how often JupyterHub polls. Cache
keys are SHA-256 digests of the token, so Redis never holds a usable credential.

A spawn needs both answers for a token that is usually new; ``identity`` reads both cache
entries in one Redis call and asks Gafaelfawr for the missing ones at once, so a new token
costs one round trip to each rather than two in turn. Calls go through urllib3's pool
directly: ``requests`` would merge proxy settings from the environment on every call, and
past its pool size would open (and discard) extra connections; here a call waits for one
of the pool's connections instead.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import redis
import urllib3
from marshmallow import Schema, ValidationError
from urllib3.util.retry import Retry

from app import metrics
from app.concurrency import concurrently
from app.errors import AuthenticationError, DependencyUnavailableError
from app.models.config import GafaelfawrConfig
from app.models.identity import TokenData, UserInfo
from app.schemas.gafaelfawr import TokenInfoSchema, UserInfoSchema

logger = logging.getLogger(__name__)

LOCAL_CACHE_SECONDS = 5.0
"""How long this process reuses an answer before asking Redis again."""

CONNECTIONS = 32
"""Connections to Gafaelfawr per process, and calls in flight."""

_LOCAL_CACHE_ENTRIES = 10_000
_STRIPES = 64


@dataclass(frozen=True)
class _Kind:
    """One of Gafaelfawr's answers about a token."""

    name: str
    path: str
    schema: Schema

    @property
    def metric(self) -> str:
        """The answer's name as a metric label (``token_info``, ``user_info``)."""
        return self.name.replace("-", "_")


_TOKEN_INFO = _Kind("token-info", "/auth/api/v1/token-info", TokenInfoSchema())
_USER_INFO = _Kind("user-info", "/auth/api/v1/user-info", UserInfoSchema())


def _count_lookups(kinds: tuple[_Kind, ...], indexes: Iterable[int], source: str) -> None:
    """Count where each of these answers was found (``memory``, ``redis``, ``gafaelfawr``)."""
    for i in indexes:
        metrics.GAFAELFAWR_LOOKUPS_HOT.inc(kinds[i].metric, source)


def _count_request(kind: _Kind, status: int, began: float) -> None:
    metrics.GAFAELFAWR_REQUESTS.labels(kind.metric, str(status)).inc()
    metrics.GAFAELFAWR_REQUEST_DURATION.labels(kind.metric).observe(time.monotonic() - began)


class GafaelfawrClient:
    """Verifies tokens and fetches identities."""

    def __init__(
        self,
        config: GafaelfawrConfig,
        redis_client: redis.Redis,
        key_prefix: str,
    ) -> None:
        self._config = config
        self._redis = redis_client
        self._prefix = f"{key_prefix}gafaelfawr:"
        # A refused connection is tried once more; a request that was sent and not
        # answered in time is not: the caller waits one timeout, never several.
        retry = Retry(total=1, connect=1, read=0, status=0, other=0, redirect=0)
        self._http = urllib3.PoolManager(maxsize=CONNECTIONS, block=True, retries=retry)
        # A few seconds of memory in front of Redis: JupyterHub polls every lab's status
        # with one token, so most requests then need no Redis round trip for auth.
        self._local: dict[str, tuple[float, Any]] = {}
        self._local_seconds = min(LOCAL_CACHE_SECONDS, float(config.cache_seconds))
        # One fetch per token at a time: without it, every request that misses the cache at
        # the same moment (a burst of streams opening) asks Gafaelfawr itself.
        self._stripes = [threading.Lock() for _ in range(_STRIPES)]

    def token_info(self, token: str) -> TokenData:
        """What the token proves; ``AuthenticationError`` if Gafaelfawr rejects it."""
        (result,) = self._fetch(token, (_TOKEN_INFO,))
        return result

    def identity(self, token: str) -> tuple[TokenData, UserInfo]:
        """What the token proves and who its user is (uid, gid, groups, quota), fetched
        together (see the module's docstring)."""
        token_data, user = self._fetch(token, (_TOKEN_INFO, _USER_INFO))
        return token_data, user

    def _fetch(self, token: str, kinds: tuple[_Kind, ...]) -> list[Any]:
        """The parsed answers: from this process's memory, else Redis, else Gafaelfawr.

        The memory holds parsed answers (immutable), so a request that finds one there
        costs a hash and a lookup, not a schema load.
        """
        digest = hashlib.sha256(token.encode()).hexdigest()
        keys = [f"{self._prefix}{kind.name}:{digest}" for kind in kinds]
        found = [self._local_get(key) for key in keys]
        if all(value is not None for value in found):
            _count_lookups(kinds, range(len(kinds)), "memory")
            return found
        with self._stripes[int(digest[:8], 16) % _STRIPES]:
            found = [self._local_get(key) for key in keys]
            missing = [i for i, value in enumerate(found) if value is None]
            _count_lookups(kinds, (i for i in range(len(kinds)) if i not in missing), "memory")
            if not missing:
                return found
            cached = self._cache_get([keys[i] for i in missing])
            unasked = [i for i, text in zip(missing, cached, strict=True) if text is None]
            _count_lookups(kinds, (i for i in missing if i not in unasked), "redis")
            _count_lookups(kinds, unasked, "gafaelfawr")
            asks = [functools.partial(self._ask, kinds[i], token) for i in unasked]
            asked = concurrently(*asks) if asks else []
            answers = dict(zip(unasked, asked, strict=True))
            for i, text in zip(missing, cached, strict=True):
                data = json.loads(text) if text is not None else answers[i]
                found[i] = self._parse(kinds[i], data)
                self._local_set(keys[i], found[i])
            self._cache_set({keys[i]: json.dumps(answers[i]) for i in unasked})
            return found

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

    def _ask(self, kind: _Kind, token: str) -> Any:
        """Gafaelfawr's own answer, or the error it means for our caller."""
        timeout = self._config.timeout
        began = time.monotonic()
        try:
            response = self._http.request(
                "GET",
                self._config.url + kind.path,
                headers={"Authorization": f"Bearer {token}"},
                timeout=timeout,
                pool_timeout=timeout,
            )
        except urllib3.exceptions.HTTPError as exc:
            _count_request(kind, 0, began)
            logger.warning("Gafaelfawr %s request failed: %s", kind.name, type(exc).__name__)
            raise DependencyUnavailableError(
                "cannot verify the token: the authentication service is unavailable"
            ) from None
        _count_request(kind, response.status, began)
        if response.status in (401, 403):
            raise AuthenticationError("the token is invalid or expired")
        if response.status != 200:
            logger.warning("Gafaelfawr %s answered HTTP %d", kind.name, response.status)
            raise DependencyUnavailableError(
                "cannot verify the token: the authentication service answered "
                f"HTTP {response.status}"
            )
        try:
            return json.loads(response.data)
        except ValueError:
            raise DependencyUnavailableError(
                f"the authentication service's {kind.name} answer is not JSON"
            ) from None

    # Redis errors are not caught here: every route needs Redis after authenticating, so an
    # outage is answered 503 at once rather than after a Gafaelfawr round trip and a second
    # wait for a Redis that does not answer.

    def _cache_get(self, keys: list[str]) -> list[str | None]:
        if self._config.cache_seconds <= 0:
            return [None] * len(keys)
        values = self._redis.mget(keys)
        return [value if isinstance(value, str) else None for value in values]

    def _cache_set(self, entries: dict[str, str]) -> None:
        if self._config.cache_seconds <= 0 or not entries:
            return
        pipeline = self._redis.pipeline(transaction=False)
        for key, value in entries.items():
            pipeline.set(key, value, ex=self._config.cache_seconds)
        pipeline.execute()

    @staticmethod
    def _parse(kind: _Kind, data: Any) -> Any:
        try:
            return kind.schema.load(data)
        except ValidationError as exc:
            raise DependencyUnavailableError(
                f"the authentication service's {kind.name} answer is malformed: {exc.messages}"
            ) from None

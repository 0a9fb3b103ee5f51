"""One Redis connection pool per process, shared by every request and worker thread.

Timeouts are explicit: a connect timeout short enough that readiness fails fast when Redis
is gone, and a socket timeout above any blocking read the service issues (event streams
block for less than ``socketTimeout``), so a dead server never hangs a request.

Redis is one server at a URL, or the primary that Redis Sentinel names. With Sentinel every
new connection asks the sentinels where the primary is, so after a failover the pool follows
the new primary by itself. During the failover each command fails fast with a
``redis.ConnectionError`` (the old primary refused, no primary is known yet, the old
primary was demoted), which the service answers with 503 ``dependency_unavailable``; no
command waits for the failover to end.
"""

from __future__ import annotations

from typing import Any, cast

import redis
from flask import Flask, current_app
from flask_sse import ServerSentEventsBlueprint
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection

from app import metrics
from app.extensions.redis_stalls import RedisStalledError, StallBreaker, breaker_for
from app.models.config import RedisConfig
from app.services.health import PROBE_TIMEOUT

NO_REPLICAS = "NOREPLICAS"
"""The error a primary answers a write with when it has fewer replicas than its
``min-replicas-to-write``: after a failover, the old primary whose replica was promoted."""


def _no_retry() -> Retry:
    """No retries inside redis-py: a command fails at once and the caller decides (a
    request answers 503, background work tries again on its own schedule)."""
    return Retry(NoBackoff(), 0)


class CountedConnection(redis.connection.AbstractConnection):
    """Counts each round trip (a command or a pipeline sent) and each that failed without
    an answer, for the metrics, and fails fast while the server is stalled
    (``redis_stalls``): the one place every client of the process goes through, whether
    it reaches Redis by URL or through Sentinel."""

    def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        # A connection being made sends its handshake through here too, by then knowing
        # the server's address (Sentinel's primary's included).
        self._breaker().before_send(self)
        metrics.REDIS_ROUND_TRIPS_HOT.inc()
        try:
            super().send_packed_command(*args, **kwargs)
        except redis.RedisError as exc:
            self._failed(exc)
            raise

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            response = super().read_response(*args, **kwargs)
        except redis.ResponseError:
            self._breaker().answered()
            raise
        except redis.RedisError as exc:
            self._failed(exc)
            raise
        self._breaker().answered()
        return response

    def connect(self) -> None:
        # The pool connects before a command is sent: Redis down fails here, and a stalled
        # server (whose listen queue may be full) is not dialled again meanwhile.
        self._breaker().before_send(self)
        try:
            super().connect()
        except redis.RedisError as exc:
            self._failed(exc)
            raise

    def disconnect(self, *args: Any, **kwargs: Any) -> None:
        self._breaker().released(self)
        super().disconnect(*args, **kwargs)

    def _failed(self, exc: redis.RedisError) -> None:
        if isinstance(exc, redis.TimeoutError):
            self._breaker().timed_out(self)
        else:
            self._breaker().released(self)
        _count_error(exc)

    def _breaker(self) -> StallBreaker:
        path = getattr(self, "path", None)
        return breaker_for(path or f"{getattr(self, 'host', '')}:{getattr(self, 'port', '')}")


def _count_error(exc: redis.RedisError) -> None:
    # An error reply (a script's, NOSCRIPT) is an answer: only a missing one counts, once
    # (a connect inside a send fails both).
    if getattr(exc, "_counted", False):
        return
    exc._counted = True  # type: ignore[attr-defined]
    if isinstance(exc, RedisStalledError):
        metrics.REDIS_ERRORS.labels("stalled").inc()
    elif isinstance(exc, redis.TimeoutError):
        metrics.REDIS_ERRORS.labels("timeout").inc()
    elif isinstance(exc, redis.ConnectionError):
        metrics.REDIS_ERRORS.labels("connection").inc()


class _TcpConnection(CountedConnection, redis.Connection):
    pass


class _SslConnection(CountedConnection, redis.SSLConnection):
    pass


class _UnixConnection(CountedConnection, redis.UnixDomainSocketConnection):
    pass


_COUNTED: dict[type, type] = {
    redis.Connection: _TcpConnection,
    redis.SSLConnection: _SslConnection,
    redis.UnixDomainSocketConnection: _UnixConnection,
}
"""The counted class of each connection class a URL may choose (``redis://``, ``rediss://``,
``unix://``)."""


class PrimaryConnection(CountedConnection, SentinelManagedConnection):
    """A connection to the primary Sentinel names, which leaves a server that can no
    longer take our writes.

    redis-py already turns ``READONLY`` (the server was demoted to a replica) into a
    disconnect and a ``ConnectionError``, so the next connection asks the sentinels again.
    ``NOREPLICAS`` means the same thing for a primary whose only replica was just promoted
    (``min-replicas-to-write`` refuses its writes so that none is lost): treated alike,
    the request gets 503 rather than 500 and the pool looks for the new primary at once.
    """

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)
        except redis.ResponseError as exc:
            if str(exc).startswith(NO_REPLICAS) and self.connection_pool.is_master:
                self.disconnect()
                raise redis.ConnectionError(
                    "the primary has too few replicas to write; looking for a new one"
                ) from None
            raise


class BlockingSentinelConnectionPool(SentinelConnectionPool, redis.BlockingConnectionPool):
    """Sentinel's pool with the blocking pool's bound: at the limit a command waits (up to
    the socket timeout) for a free connection instead of failing at once, as with a URL."""


def _connection_options(
    socket_timeout: float | None,
    connect_timeout: float,
    *,
    password: str | None,
    username: str | None,
) -> dict[str, Any]:
    """How every connection is made, to the server and to a sentinel alike: the timeouts,
    no retries inside redis-py, answers as text, and the credentials that are set."""
    options: dict[str, Any] = {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": connect_timeout,
        "retry": _no_retry(),
        "decode_responses": True,
    }
    if password:
        options["password"] = password
    if username:
        options["username"] = username
    return options


def _server_options(
    config: RedisConfig, socket_timeout: float | None, connect_timeout: float
) -> dict[str, Any]:
    """The connections to the server (the primary, with Sentinel, and its database)."""
    sentinel = config.sentinel
    options = _connection_options(
        socket_timeout,
        connect_timeout,
        password=config.password,
        username=sentinel.username if sentinel is not None else None,
    )
    if sentinel is not None:
        options["db"] = sentinel.db
    return options


def build_sentinel(config: RedisConfig, timeout: float) -> Sentinel:
    """A client of the sentinels themselves, each asked in turn for the primary.

    ``timeout`` bounds each sentinel's connect and answer, so finding the primary takes at
    most twice that per sentinel listed even when some are unreachable.
    """
    sentinel = config.sentinel
    assert sentinel is not None
    options = _connection_options(
        timeout,
        timeout,
        password=sentinel.sentinel_password,
        username=sentinel.sentinel_username,
    )
    return Sentinel(list(sentinel.addresses), sentinel_kwargs=options)


def _client(
    config: RedisConfig,
    *,
    socket_timeout: float | None,
    connect_timeout: float,
    max_connections: int,
    pool_timeout: float | None,
    health_check_interval: int = 0,
) -> redis.Redis:
    options = _server_options(config, socket_timeout, connect_timeout)
    options["health_check_interval"] = health_check_interval
    if config.sentinel is not None:
        sentinel = build_sentinel(config, min(connect_timeout, config.socket_connect_timeout))
        return sentinel.master_for(
            config.sentinel.service_name,
            connection_pool_class=BlockingSentinelConnectionPool,
            connection_class=PrimaryConnection,
            max_connections=max_connections,
            timeout=pool_timeout,
            **options,
        )
    assert config.url is not None
    pool = redis.BlockingConnectionPool.from_url(
        config.url, max_connections=max_connections, timeout=pool_timeout, **options
    )
    pool.connection_class = _COUNTED.get(pool.connection_class, pool.connection_class)
    return redis.Redis(connection_pool=pool)


def build_redis(config: RedisConfig) -> redis.Redis:
    """A client on its own pool with the configured timeouts."""
    # A blocking pool: at the connection limit a command waits (up to the socket timeout)
    # for a free connection instead of failing at once.
    return _client(
        config,
        socket_timeout=config.socket_timeout,
        connect_timeout=config.socket_connect_timeout,
        max_connections=config.max_connections,
        pool_timeout=config.socket_timeout,
        health_check_interval=30,
    )


def build_probe_redis(config: RedisConfig) -> redis.Redis:
    """A small client of its own for the readiness probe, with the probe's short timeouts:
    a stalled Redis fails the probe in time, and a probe never waits behind requests for a
    pooled connection."""
    timeout = min(PROBE_TIMEOUT, config.socket_timeout)
    return _client(
        config,
        socket_timeout=timeout,
        connect_timeout=min(timeout, config.socket_connect_timeout),
        max_connections=2,
        pool_timeout=timeout,
    )


def build_feed_redis(config: RedisConfig) -> redis.Redis:
    """The client flask-sse subscribes the administrators' live feed with.

    A feed's connection waits for the next message without a socket timeout, as flask-sse's
    own connections do (a quiet feed is not a dead one); a failover closes it, and the
    administrator's client reconnects. Built here rather than from a URL by flask-sse, so
    the feed reaches Redis the same way as everything else: through Sentinel, with the
    password from the environment.
    """
    return _client(
        config,
        socket_timeout=None,
        connect_timeout=config.socket_connect_timeout,
        max_connections=config.max_connections,
        pool_timeout=config.socket_timeout,
    )


class FeedEvents(ServerSentEventsBlueprint):
    """flask-sse's publisher and subscriber, on the app's feed client."""

    @property
    def redis(self) -> redis.Redis:
        return cast(redis.Redis, current_app.extensions["redis-feed"])


feed_events = FeedEvents("admin-feed-events", __name__)
"""What the administrators' live feed is followed with (``services.admin.follow_feed``)."""


class RedisExtension:
    """Flask extension holding the process's Redis clients: one for everything, one for
    the readiness probe, and one for the administrators' live feed."""

    def init_app(self, app: Flask, config: RedisConfig) -> None:
        app.extensions["redis"] = build_redis(config)
        app.extensions["redis-probe"] = build_probe_redis(config)
        app.extensions["redis-feed"] = build_feed_redis(config)

    @property
    def client(self) -> redis.Redis:
        return cast(redis.Redis, current_app.extensions["redis"])

    @property
    def probe(self) -> redis.Redis:
        return cast(redis.Redis, current_app.extensions["redis-probe"])

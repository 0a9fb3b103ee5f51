"""One Redis connection pool per process, shared by every request and worker thread.

Timeouts are explicit: a connect timeout short enough that readiness fails fast when Redis
is gone, and a socket timeout above any blocking read the service issues (event streams
block for less than ``socketTimeout``), so a dead server never hangs a request.
"""

from __future__ import annotations

from typing import cast

import redis
from flask import Flask, current_app

from app.config import RedisConfig


def build_redis(config: RedisConfig) -> redis.Redis:
    """A client on its own pool with the configured timeouts."""
    # A blocking pool: at the connection limit a command waits (up to the socket timeout)
    # for a free connection instead of failing at once.
    pool = redis.BlockingConnectionPool.from_url(
        config.url,
        socket_timeout=config.socket_timeout,
        socket_connect_timeout=config.socket_connect_timeout,
        max_connections=config.max_connections,
        timeout=config.socket_timeout,
        health_check_interval=30,
        decode_responses=True,
    )
    return redis.Redis(connection_pool=pool)


PROBE_TIMEOUT = 1.0
"""Seconds the readiness probe waits for Redis: Kubernetes gives the whole probe two."""


def build_probe_redis(config: RedisConfig) -> redis.Redis:
    """A small client of its own for the readiness probe, with the probe's short timeouts:
    a stalled Redis fails the probe in time, and a probe never waits behind requests for a
    pooled connection."""
    timeout = min(PROBE_TIMEOUT, config.socket_timeout)
    pool = redis.BlockingConnectionPool.from_url(
        config.url,
        socket_timeout=timeout,
        socket_connect_timeout=min(timeout, config.socket_connect_timeout),
        max_connections=2,
        timeout=timeout,
        decode_responses=True,
    )
    return redis.Redis(connection_pool=pool)


class RedisExtension:
    """Flask extension holding the process's Redis clients: one for everything, and one
    for the readiness probe."""

    def init_app(self, app: Flask, config: RedisConfig) -> None:
        app.extensions["redis"] = build_redis(config)
        app.extensions["redis-probe"] = build_probe_redis(config)

    @property
    def client(self) -> redis.Redis:
        return cast(redis.Redis, current_app.extensions["redis"])

    @property
    def probe(self) -> redis.Redis:
        return cast(redis.Redis, current_app.extensions["redis-probe"])

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


class RedisExtension:
    """Flask extension holding the process's Redis client."""

    def init_app(self, app: Flask, config: RedisConfig) -> None:
        app.extensions["redis"] = build_redis(config)

    @property
    def client(self) -> redis.Redis:
        return cast(redis.Redis, current_app.extensions["redis"])

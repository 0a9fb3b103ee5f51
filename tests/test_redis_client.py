"""The service's Redis client: one bounded pool with the configured timeouts."""

from __future__ import annotations

import redis

from app.config.models import RedisConfig
from app.extensions.redis import build_redis
from tests.support.redis_server import RedisServer


def _config(url: str) -> RedisConfig:
    return RedisConfig(
        url=url,
        key_prefix="t:",
        socket_timeout=3.0,
        socket_connect_timeout=1.0,
        max_connections=4,
    )


def test_the_pool_is_bounded_and_every_connection_has_its_timeouts(
    redis_server: RedisServer,
) -> None:
    client = build_redis(_config(redis_server.url))
    pool = client.connection_pool
    assert isinstance(pool, redis.BlockingConnectionPool)
    assert pool.max_connections == 4
    kwargs = pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (3.0, 1.0)
    assert kwargs["decode_responses"] is True
    client.set("t:ready", "yes")
    assert client.get("t:ready") == "yes"
    # At the limit a command waits for a free connection instead of failing at once.
    held = [pool.get_connection() for _ in range(4)]
    pool.release(held.pop())
    assert client.ping()
    for connection in held:
        pool.release(connection)
    client.close()

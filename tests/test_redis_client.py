"""The service's Redis client: its pool's ready check answers like redis-py's own."""

from __future__ import annotations

from app.config.models import RedisConfig
from app.extensions.redis import ReadyCheckParser, build_redis
from tests.support.redis_server import RedisServer


def _config(url: str) -> RedisConfig:
    return RedisConfig(
        url=url,
        key_prefix="t:",
        socket_timeout=3.0,
        socket_connect_timeout=1.0,
        max_connections=4,
    )


def test_the_ready_check_tells_idle_from_unread_connections(redis_server: RedisServer) -> None:
    client = build_redis(_config(redis_server.url))
    assert client.ping()
    connection = client.connection_pool.get_connection()
    try:
        parser = connection._parser
        assert isinstance(parser, ReadyCheckParser)
        assert connection.can_read() is False
        # A reply nobody read yet: the pool must not hand this connection out as clean.
        connection.send_command("PING")
        assert connection.can_read(timeout=1.0) is True
        assert connection.read_response() == "PONG"
        assert connection.can_read() is False
    finally:
        client.connection_pool.release(connection)
    # Commands go on working through the pool.
    client.set("t:ready", "yes")
    assert client.get("t:ready") == "yes"
    client.close()

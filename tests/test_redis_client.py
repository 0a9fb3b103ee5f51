"""The service's Redis client: one bounded pool with the configured timeouts, by URL or
through Redis Sentinel, and what a request sees when Redis cannot take its writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from flask import Flask
from redis.sentinel import MasterNotFoundError

from app.extensions.redis import (
    BlockingSentinelConnectionPool,
    PrimaryConnection,
    build_probe_redis,
    build_redis,
)
from app.models.config import RedisConfig, RedisSentinelConfig
from app.storage import scripts
from app.web.errors import register_error_handlers
from devstack.sentinel import SentinelGroup
from tests.support.redis_server import RedisServer


def _config(url: str) -> RedisConfig:
    return RedisConfig(
        url=url,
        sentinel=None,
        key_prefix="t:",
        socket_timeout=3.0,
        socket_connect_timeout=1.0,
        max_connections=4,
        password=None,
    )


def _sentinel_config(
    group: SentinelGroup, service_name: str | None = None, password: str | None = None
) -> RedisConfig:
    sentinel = RedisSentinelConfig(
        addresses=tuple(("127.0.0.1", port) for port in group.sentinel_ports),
        service_name=service_name or group.service_name,
        db=0,
        username=None,
        sentinel_username=None,
        sentinel_password=password,
    )
    return RedisConfig(
        url=None,
        sentinel=sentinel,
        key_prefix="t:",
        socket_timeout=3.0,
        socket_connect_timeout=1.0,
        max_connections=4,
        password=password,
    )


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelGroup]:
    group = SentinelGroup(Path(tmp_path_factory.mktemp("sentinel"))).start()
    yield group
    group.stop()


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


def test_through_sentinel_the_pool_is_as_bounded_and_finds_the_primary(
    group: SentinelGroup,
) -> None:
    config = _sentinel_config(group)
    client = build_redis(config)
    pool = client.connection_pool
    assert isinstance(pool, BlockingSentinelConnectionPool)
    assert pool.max_connections == 4
    kwargs = pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (3.0, 1.0)
    assert pool.connection_class is PrimaryConnection
    client.set("t:through-sentinel", "yes")
    assert group.primary_client().get("t:through-sentinel") == "yes"
    assert pool.get_master_address() == group.primary_address()
    held = [pool.get_connection() for _ in range(4)]
    pool.release(held.pop())
    assert client.ping()
    for connection in held:
        pool.release(connection)
    probe = build_probe_redis(config)
    assert probe.connection_pool.connection_kwargs["socket_timeout"] == 1.0
    assert probe.ping()
    client.close()
    probe.close()


def test_passwords_stay_out_of_the_configs_repr(group: SentinelGroup) -> None:
    config = _sentinel_config(group, password="a-secret")
    assert config.password == "a-secret"
    assert config.sentinel is not None and config.sentinel.sentinel_password == "a-secret"
    assert "a-secret" not in repr(config)


def test_a_primary_without_its_replica_fails_writes_fast_then_takes_them_again(
    group: SentinelGroup,
) -> None:
    client = build_redis(_sentinel_config(group))
    assert client.set("t:before", "1")
    replica = next(node for node in group.nodes if node.port != group.primary().port)
    assert replica.process is not None
    replica.process.kill()
    replica.process.wait()
    try:
        # NOREPLICAS: the primary refuses writes it could lose; a ConnectionError, not a
        # ResponseError, so the request is answered 503, not 500.
        with pytest.raises(redis.ConnectionError):
            client.set("t:during", "1")
        assert client.get("t:before") == "1"  # reads still served
    finally:
        group.restart(replica)
    assert client.set("t:after", "1")
    client.close()


def test_scripts_are_loaded_again_on_a_server_that_does_not_know_them(
    group: SentinelGroup,
) -> None:
    """A new primary may not have the script cache: NOSCRIPT is answered by sending the
    script's text once."""
    client = build_redis(_sentinel_config(group))
    lease = scripts.load(client, "lease_renew")
    client.set("t:lease", "me")
    assert lease(keys=["t:lease"], args=["me", 5000]) == 1
    group.primary_client().script_flush()
    assert lease(keys=["t:lease"], args=["me", 5000]) == 1
    client.close()


def test_an_unknown_service_fails_fast_with_master_not_found(group: SentinelGroup) -> None:
    client = build_redis(_sentinel_config(group, service_name="nobody"))
    with pytest.raises(MasterNotFoundError):
        client.ping()
    client.close()


def _app(client: redis.Redis) -> Flask:
    app = Flask(__name__)
    register_error_handlers(app)

    @app.post("/write")
    def write() -> str:
        client.set("t:written", "1")
        return "ok"

    return app


@pytest.mark.parametrize("target", ["replica", "unknown-service", "no-replicas"])
def test_a_request_that_cannot_write_is_answered_503(group: SentinelGroup, target: str) -> None:
    """Writing to a replica (a demoted primary, reached by URL), to a service no sentinel
    knows, or to a primary without its replica: 503 ``dependency_unavailable``."""
    primary = group.primary()
    replica = next(node for node in group.nodes if node.port != primary.port)
    if target == "replica":
        client = build_redis(_config(f"redis://127.0.0.1:{replica.port}/0"))
    elif target == "unknown-service":
        client = build_redis(_sentinel_config(group, service_name="nobody"))
    else:
        client = redis.Redis(port=primary.port, decode_responses=True)
        assert replica.process is not None
        replica.process.kill()
        replica.process.wait()
    try:
        response = _app(client).test_client().post("/write")
    finally:
        group.restart(replica)
        client.close()
    assert response.status_code == 503
    assert response.get_json()["code"] == "dependency_unavailable"

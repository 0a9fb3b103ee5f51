"""Liveness and readiness, including Redis stopped and restarted."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from devstack.gafaelfawr import GafaelfawrEmulator
from devstack.kube import KubernetesEmulator
from tests.conftest import service_config
from tests.support.redis_server import RedisServer


def test_healthz_needs_nothing(client: FlaskClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}


def test_readyz_when_everything_answers(client: FlaskClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.get_json() == {
        "status": "ready",
        "checks": {"redis": "ok", "kubernetes": "ok"},
    }


def test_readyz_follows_redis_down_and_back(
    gafaelfawr: GafaelfawrEmulator, kube: KubernetesEmulator, make_app: Callable[[Config], Flask]
) -> None:
    server = RedisServer().start()
    try:
        config = parse_config(service_config(server.url, gafaelfawr.url, kube.url))
        client = make_app(config).test_client()
        assert client.get("/readyz").status_code == 200

        server.stop()
        response = client.get("/readyz")
        assert response.status_code == 503
        body = response.get_json()
        assert body["code"] == "not_ready"
        assert "redis" in body["message"]
        assert body["checks"]["redis"].startswith("error")
        assert body["checks"]["kubernetes"] == "ok"
        # Liveness does not depend on Redis: a Redis outage must not restart the pod.
        assert client.get("/healthz").status_code == 200

        server.start()
        assert client.get("/readyz").status_code == 200
    finally:
        server.close()


def test_readyz_names_kubernetes_when_it_is_down(
    redis_server: RedisServer, gafaelfawr: GafaelfawrEmulator, make_app: Callable[[Config], Flask]
) -> None:
    kube = KubernetesEmulator().start()
    url = kube.url
    kube.stop()
    client = make_app(
        parse_config(service_config(redis_server.url, gafaelfawr.url, url))
    ).test_client()
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.get_json()
    assert body["message"] == "not ready: kubernetes unavailable"
    assert body["checks"]["redis"] == "ok"


def test_unknown_route_is_json_404(client: FlaskClient) -> None:
    response = client.get("/no/such/route")
    assert response.status_code == 404
    assert response.get_json()["code"] == "not_found"


def test_redis_outage_is_503_not_500(
    gafaelfawr: GafaelfawrEmulator,
    kube: KubernetesEmulator,
    make_app: Callable[[Config], Flask],
    tokens: dict[str, str],
) -> None:
    server = RedisServer().start()
    try:
        config = parse_config(service_config(server.url, gafaelfawr.url, kube.url))
        client = make_app(config).test_client()
        server.stop()
        response = client.get(
            "/spawner/v1/labs", headers={"Authorization": f"Bearer {tokens['admin']}"}
        )
        assert response.status_code == 503
        assert response.get_json() == {
            "code": "dependency_unavailable",
            "message": "the service's state store (Redis) is unavailable",
        }
    finally:
        server.close()

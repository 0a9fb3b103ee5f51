"""Liveness and readiness, including Redis stopped and restarted."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app import create_app
from app.config import Config, parse_config
from devstack.gafaelfawr import GafaelfawrEmulator
from devstack.kube import KubernetesEmulator
from devstack.serving import ServerThread
from tests.conftest import service_config
from tests.labs.conftest import wait_for
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
        "checks": {"redis": "ok", "kubernetes": "ok", "state": "ok", "images": "ok"},
        "maintenance": None,
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
        # Redis came back empty: ready again once the leader has rebuilt it from Kubernetes.
        seen: list[str] = []

        def ready() -> bool:
            response = client.get("/readyz")
            seen.append(response.get_json()["checks"]["state"])
            return response.status_code == 200

        wait_for(ready)
        assert seen[-1] == "ok" and set(seen) <= {"ok", "rebuilding", "unknown"}
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


def test_stalled_redis_is_503_within_its_timeout(
    gafaelfawr: GafaelfawrEmulator,
    kube: KubernetesEmulator,
    make_app: Callable[[Config], Flask],
    tokens: dict[str, str],
) -> None:
    """A Redis that accepts connections and never answers (a hung host, a partition) costs
    a request one ``socketTimeout``, and the readiness probe less than its own timeout."""
    server = RedisServer().start()
    try:
        raw = service_config(server.url, gafaelfawr.url, kube.url)
        raw["redis"].update(socketTimeout=1.0, socketConnectTimeout=0.5)
        client = make_app(parse_config(raw)).test_client()
        assert client.get("/readyz").status_code == 200
        server.pause()
        try:
            started = time.monotonic()
            response = client.get(
                "/spawner/v1/labs/someone", headers={"Authorization": f"Bearer {tokens['admin']}"}
            )
            took = time.monotonic() - started
            assert response.status_code == 503
            assert response.get_json()["code"] == "dependency_unavailable"
            assert took < 2.0, f"a stalled Redis held the request {took:.1f}s"

            started = time.monotonic()
            ready = client.get("/readyz")
            took = time.monotonic() - started
            assert ready.status_code == 503
            # Its own timeout, or at once: the request's timeout told the process that
            # Redis does not answer.
            assert ready.get_json()["checks"]["redis"] in (
                "error: TimeoutError",
                "error: RedisStalledError",
            )
            assert ready.get_json()["checks"]["state"] == "unknown"
            assert took < 1.5, f"the readiness probe took {took:.1f}s"
        finally:
            server.resume()
        # Ready again by itself once Redis answers.
        wait_for(lambda: client.get("/readyz").status_code == 200)
    finally:
        server.close()


@pytest.mark.parametrize(
    ("answer", "content_type", "reason"),
    [
        (b'{"major": "1", "minor": "31"}', "application/json", "without gitVersion"),
        (b"<html>a proxy's page</html>", "text/html", "with no JSON"),
        (b"[]", "application/json", "without gitVersion"),
    ],
)
def test_readyz_is_503_with_the_reason_when_the_api_server_answers_what_it_cannot_use(
    redis_server: RedisServer,
    gafaelfawr: GafaelfawrEmulator,
    answer: bytes,
    content_type: str,
    reason: str,
) -> None:
    """An answer the client's models would refuse (a field missing, a proxy's page) is an
    unready API server, named, never a 500."""

    def api_server(environ: dict[str, Any], start: Callable[..., Any]) -> list[bytes]:
        start("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(answer)))])
        return [answer]

    server = ServerThread(api_server).start()
    try:
        raw = service_config(redis_server.url, gafaelfawr.url, server.url)
        # No background work: nothing else of the service could run against this server.
        response = create_app(parse_config(raw)).test_client().get("/readyz")
    finally:
        server.stop()
    assert response.status_code == 503
    body = response.get_json()
    assert body["code"] == "not_ready"
    assert body["checks"]["kubernetes"] == f"error: /version answered {reason}"
    assert "kubernetes unavailable" in body["message"]

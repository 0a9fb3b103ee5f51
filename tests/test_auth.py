"""Authentication against the Gafaelfawr emulator and per-route grants."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask import Blueprint, Flask, jsonify
from flask.testing import FlaskClient

from app.config import Config, parse_config
from app.log import redact
from app.services.auth import ADMIN, OWNER
from blueprints.support.auth import current_caller, requires
from devstack.gafaelfawr import GafaelfawrEmulator
from devstack.kube import KubernetesEmulator
from tests.conftest import bearer, service_config
from tests.labs.conftest import wait_for
from tests.support.redis_server import RedisServer

probe = Blueprint("probe", __name__)


@probe.get("/probe/admin")
@requires(ADMIN)
def admin_only() -> object:
    return jsonify({"user": current_caller().username})


@probe.get("/probe/users/<username>")
@requires(OWNER)
def owner_only(username: str) -> object:
    return jsonify({"user": current_caller().username, "path": username})


@probe.get("/probe/users/<username>/either")
@requires(OWNER, ADMIN)
def owner_or_admin(username: str) -> object:
    return jsonify({"user": current_caller().username})


@pytest.fixture
def with_probe(make_app: Callable[[Config], Flask]) -> Callable[[Config], Flask]:
    def make(config: Config) -> Flask:
        app = make_app(config)
        app.register_blueprint(probe)
        return app

    return make


@pytest.fixture
def probe_client(config: Config, with_probe: Callable[[Config], Flask]) -> FlaskClient:
    return with_probe(config).test_client()


def _assert_error(response: object, status: int, code: str) -> dict[str, str]:
    assert response.status_code == status  # type: ignore[attr-defined]
    body: dict[str, str] = response.get_json()  # type: ignore[attr-defined]
    assert body["code"] == code
    assert body["message"]
    return body


def test_no_token_is_401_with_challenge(probe_client: FlaskClient) -> None:
    response = probe_client.get("/probe/admin")
    body = _assert_error(response, 401, "not_authenticated")
    assert "Bearer" in body["message"]
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_unknown_token_is_401(probe_client: FlaskClient, gafaelfawr: GafaelfawrEmulator) -> None:
    token = gafaelfawr.issue_token("rachel", ["exec:notebook"])
    gafaelfawr.revoke(token)
    _assert_error(probe_client.get("/probe/admin", headers=bearer(token)), 401, "not_authenticated")
    _assert_error(
        probe_client.get("/probe/admin", headers=bearer("not-a-token")), 401, "not_authenticated"
    )


def test_non_bearer_authorization_is_401(probe_client: FlaskClient) -> None:
    response = probe_client.get("/probe/admin", headers={"Authorization": "Basic cmFjaGVsOng="})
    body = _assert_error(response, 401, "not_authenticated")
    assert "Bearer" in body["message"]


def test_wrong_scope_is_403(probe_client: FlaskClient, tokens: dict[str, str]) -> None:
    body = _assert_error(
        probe_client.get("/probe/admin", headers=bearer(tokens["rachel"])), 403, "permission_denied"
    )
    assert "admin:notebook" in body["message"]
    body = _assert_error(
        probe_client.get("/probe/users/rachel", headers=bearer(tokens["rachel-readonly"])),
        403,
        "permission_denied",
    )
    assert "exec:notebook" in body["message"]


def test_wrong_user_is_403(probe_client: FlaskClient, tokens: dict[str, str]) -> None:
    body = _assert_error(
        probe_client.get("/probe/users/wile", headers=bearer(tokens["rachel"])),
        403,
        "permission_denied",
    )
    assert "rachel" in body["message"] and "wile" in body["message"]


def test_admin_and_owner_allowed(probe_client: FlaskClient, tokens: dict[str, str]) -> None:
    response = probe_client.get("/probe/admin", headers=bearer(tokens["admin"]))
    assert response.status_code == 200
    assert response.get_json() == {"user": "jupyterhub"}
    response = probe_client.get("/probe/users/rachel", headers=bearer(tokens["rachel"]))
    assert response.get_json() == {"user": "rachel", "path": "rachel"}


def test_owner_or_admin(probe_client: FlaskClient, tokens: dict[str, str]) -> None:
    assert (
        probe_client.get("/probe/users/wile/either", headers=bearer(tokens["admin"])).status_code
        == 200
    )
    assert (
        probe_client.get("/probe/users/wile/either", headers=bearer(tokens["wile"])).status_code
        == 200
    )
    response = probe_client.get("/probe/users/wile/either", headers=bearer(tokens["rachel"]))
    _assert_error(response, 403, "permission_denied")


def test_user_header_without_matching_token_is_rejected(
    probe_client: FlaskClient, tokens: dict[str, str]
) -> None:
    # A forged username header never grants anything: the token decides.
    headers = {**bearer(tokens["rachel"]), "X-Auth-Request-User": "wile"}
    _assert_error(probe_client.get("/probe/users/wile", headers=headers), 403, "permission_denied")
    _assert_error(
        probe_client.get("/probe/users/wile", headers={"X-Auth-Request-User": "wile"}),
        401,
        "not_authenticated",
    )


def test_gafaelfawr_header_token_is_accepted(
    probe_client: FlaskClient, tokens: dict[str, str]
) -> None:
    headers = {"X-Auth-Request-Token": tokens["wile"], "X-Auth-Request-User": "wile"}
    response = probe_client.get("/probe/users/wile", headers=headers)
    assert response.status_code == 200


@pytest.mark.parametrize("status", [500, 502, 503])
def test_gafaelfawr_errors_give_503(
    probe_client: FlaskClient,
    gafaelfawr: GafaelfawrEmulator,
    tokens: dict[str, str],
    status: int,
) -> None:
    gafaelfawr.fail_with(status)
    _assert_error(
        probe_client.get("/probe/admin", headers=bearer(tokens["admin"])),
        503,
        "dependency_unavailable",
    )


def test_gafaelfawr_unreachable_gives_503(
    redis_server: RedisServer,
    kube: KubernetesEmulator,
    tokens: dict[str, str],
    redis_client: object,
    with_probe: Callable[[Config], Flask],
) -> None:
    # A port nothing listens on: connection refused, not a hang.
    gafaelfawr = GafaelfawrEmulator().start()
    url = gafaelfawr.url
    gafaelfawr.stop()
    config = parse_config(service_config(redis_server.url, url, kube.url))
    client = with_probe(config).test_client()
    _assert_error(
        client.get("/probe/admin", headers=bearer(tokens["admin"])), 503, "dependency_unavailable"
    )


def test_answers_are_cached_in_redis_without_the_token(
    probe_client: FlaskClient,
    gafaelfawr: GafaelfawrEmulator,
    tokens: dict[str, str],
    redis_client: object,
) -> None:
    gafaelfawr.reset_requests()
    for _ in range(5):
        assert probe_client.get("/probe/admin", headers=bearer(tokens["admin"])).status_code == 200
    assert gafaelfawr.requests["token-info"] == 1
    keys = redis_client.keys("*")  # type: ignore[attr-defined]
    assert keys
    dump = " ".join(keys) + " ".join(_value(redis_client, k) for k in keys)
    assert tokens["admin"] not in dump


def _value(client: Any, key: str) -> str:
    """Any Redis value as text, whatever its type."""
    kind = client.type(key)
    if kind == "hash":
        return str(client.hgetall(key))
    if kind == "string":
        return str(client.get(key))
    return str(client.dump(key))


def test_tokens_never_reach_logs_or_bodies(
    probe_client: FlaskClient,
    gafaelfawr: GafaelfawrEmulator,
    tokens: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    token = tokens["rachel"]
    bodies = [
        probe_client.get("/probe/admin", headers=bearer(token)).get_data(as_text=True),
        probe_client.get("/probe/users/wile", headers=bearer(token)).get_data(as_text=True),
    ]
    gafaelfawr.fail_with(500)
    bodies.append(
        probe_client.get("/probe/admin", headers=bearer(token + "x")).get_data(as_text=True)
    )
    for body in bodies:
        assert token not in body
    assert token not in caplog.text


def test_redaction_of_tokens_in_text(tokens: dict[str, str]) -> None:
    token = tokens["rachel"]
    assert token not in redact(f"calling with {token} now")
    assert "abc.def" not in redact("Authorization: Bearer abc.def")
    assert redact("nothing secret") == "nothing secret"


def test_concurrent_misses_ask_gafaelfawr_once(
    config: Config,
    with_probe: Callable[[Config], Flask],
    gafaelfawr: GafaelfawrEmulator,
) -> None:
    app = with_probe(config)
    token = gafaelfawr.issue_token("jupyterhub", ["admin:notebook"], token_type="service")
    gafaelfawr.reset_requests()
    gafaelfawr.set_latency(0.3)
    statuses: list[int] = []

    def call() -> None:
        response = app.test_client().get("/probe/admin", headers=bearer(token))
        statuses.append(response.status_code)

    threads = [threading.Thread(target=call) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert statuses == [200] * 10
    assert gafaelfawr.requests["token-info"] == 1


def test_a_stalled_gafaelfawr_costs_one_timeout(
    redis_server: RedisServer,
    gafaelfawr: GafaelfawrEmulator,
    kube: KubernetesEmulator,
    tokens: dict[str, str],
    redis_client: object,
    with_probe: Callable[[Config], Flask],
) -> None:
    """A request sent to Gafaelfawr and not answered is not sent again: the caller waits one
    ``gafaelfawr.timeout``, then gets 503."""
    raw = service_config(redis_server.url, gafaelfawr.url, kube.url)
    raw["gafaelfawr"]["timeout"] = 0.5
    client = with_probe(parse_config(raw)).test_client()
    gafaelfawr.set_latency(5.0)
    try:
        started = time.monotonic()
        response = client.get("/probe/admin", headers=bearer(tokens["admin"]))
        took = time.monotonic() - started
    finally:
        gafaelfawr.set_latency(0.0)
    _assert_error(response, 503, "dependency_unavailable")
    assert took < 0.9, f"a stalled Gafaelfawr held the request {took:.1f}s"


def test_a_new_token_costs_one_round_trip_for_both_answers(
    client: FlaskClient, gafaelfawr: GafaelfawrEmulator
) -> None:
    """A route acting on the user (here the spawn form) asks Gafaelfawr for token-info and
    user-info at once for a token it has not seen, and nothing more for the same token."""
    token = gafaelfawr.issue_token("rachel", ["exec:notebook"])
    gafaelfawr.set_latency(0.2)
    wait_for(lambda: gafaelfawr.in_flight == 0)  # an earlier test's stalled call
    gafaelfawr.reset_requests()
    assert client.get("/spawner/v1/spawn-form/rachel", headers=bearer(token)).status_code == 200
    assert gafaelfawr.requests == {"token-info": 1, "user-info": 1}
    assert gafaelfawr.peak_in_flight == 2
    assert client.get("/spawner/v1/spawn-form/rachel", headers=bearer(token)).status_code == 200
    assert gafaelfawr.requests == {"token-info": 1, "user-info": 1}

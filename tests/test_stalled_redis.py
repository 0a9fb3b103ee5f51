"""A stalled Redis (``SIGSTOP``: connections accepted, nothing answered) costs no request
more than one ``redis.socketTimeout``, however many requests arrive meanwhile, and the
service recovers by itself when Redis answers again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from flask import Flask

from app.config import Config, parse_config
from app.extensions.redis_stalls import PROBE_INTERVAL
from devstack.gafaelfawr import GafaelfawrEmulator
from devstack.kube import KubernetesEmulator
from tests.conftest import service_config
from tests.support.redis_server import RedisServer

SOCKET_TIMEOUT = 2.0
"""The documented default of ``redis.socketTimeout``."""

SLACK = 0.5
"""What a request may take beyond the timeout on a busy test machine."""

SPAWN = {"options": {"image": "registry.test/nothing:1", "size": "small"}}

ROUTES = [
    ("GET", "/spawner/v1/labs", "admin"),
    ("GET", "/spawner/v1/labs/rachel", "admin"),
    ("GET", "/spawner/v1/user-status", "rachel"),
    ("GET", "/spawner/v1/spawn-form/rachel", "rachel"),
    ("GET", "/spawner/v1/labs/rachel/clusters", "rachel"),
    ("GET", "/spawner/v1/labs/rachel/kernels", "rachel"),
    ("GET", "/spawner/v1/apps", "rachel"),
    ("GET", "/ddl_cluster_scaler/list/daskclusters", "rachel"),
    ("GET", "/spawner/v1/operations", "admin"),
    ("GET", "/spawner/v1/admin/audit", "admin"),
    ("GET", "/spawner/v1/admin/failed-labs", "admin"),
    ("POST", "/spawner/v1/labs/rachel/spawn", "rachel"),
    ("DELETE", "/spawner/v1/labs/wile", "admin"),
]
"""A dozen routes and more, of every blueprint that reads or writes Redis, by their callers."""


@dataclass(frozen=True)
class Answer:
    route: str
    status: int
    code: str | None
    seconds: float


def _ask(app: Flask, tokens: dict[str, str], method: str, path: str, who: str) -> Answer:
    client = app.test_client()
    started = time.monotonic()
    response = client.open(
        path,
        method=method,
        headers={"Authorization": f"Bearer {tokens[who]}"},
        json=SPAWN if method == "POST" else None,
    )
    took = time.monotonic() - started
    body = response.get_json(silent=True)
    code = body.get("code") if isinstance(body, dict) else None
    return Answer(f"{method} {path}", response.status_code, code, took)


def test_a_stalled_redis_answers_every_request_within_its_timeout_and_recovers(
    gafaelfawr: GafaelfawrEmulator,
    kube: KubernetesEmulator,
    make_app: Callable[[Config], Flask],
    tokens: dict[str, str],
) -> None:
    """Every route is polled from its own thread for three timeouts while Redis is paused:
    every answer is 503 ``dependency_unavailable`` within one timeout (not in steps of it
    as requests wait behind one another's timeouts), and most come at once. Once Redis is
    resumed, every route answers as before within a probe interval and a timeout."""
    server = RedisServer().start()
    try:
        raw = service_config(server.url, gafaelfawr.url, kube.url)
        raw["redis"].update(socketTimeout=SOCKET_TIMEOUT, socketConnectTimeout=0.5)
        app = make_app(parse_config(raw))
        before = {r.route: r.status for r in (_ask(app, tokens, *route) for route in ROUTES)}
        assert 503 not in before.values(), before

        answers: list[Answer] = []
        server.pause()
        try:
            until = time.monotonic() + 3 * SOCKET_TIMEOUT

            def poll(method: str, path: str, who: str) -> None:
                while time.monotonic() < until:
                    answers.append(_ask(app, tokens, method, path, who))

            threads = [threading.Thread(target=poll, args=route) for route in ROUTES]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            server.resume()
        resumed = time.monotonic()

        assert {a.route for a in answers} == set(before)
        slowest = max(answers, key=lambda a: a.seconds)
        assert slowest.seconds < SOCKET_TIMEOUT + SLACK, slowest
        assert {(a.status, a.code) for a in answers} == {(503, "dependency_unavailable")}
        at_once = [a for a in answers if a.seconds < SOCKET_TIMEOUT / 4]
        assert len(at_once) > 0.9 * len(answers), f"{len(at_once)} of {len(answers)} at once"

        # Recovered by itself: the first answer to a probe ends the stall.
        for route in ROUTES:
            while (answer := _ask(app, tokens, *route)).status == 503:
                assert time.monotonic() - resumed < PROBE_INTERVAL + SOCKET_TIMEOUT + SLACK
            assert answer.status == before[answer.route], answer
    finally:
        server.resume()
        server.close()

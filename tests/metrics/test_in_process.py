"""``/metrics`` of an app built without gunicorn: the same metrics, kept in this process."""

from __future__ import annotations

import redis
from flask import Flask
from prometheus_client.parser import text_string_to_metric_families

from app.metrics import multiprocess
from tests.conftest import bearer
from tests.support.redis_server import RedisServer

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(app: Flask) -> Samples:
    response = app.test_client().get("/metrics")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = sample.value
    return samples


def test_counts_and_state_without_gunicorn(
    app: Flask, tokens: dict[str, str], redis_client: redis.Redis
) -> None:
    assert not multiprocess()
    admin = bearer(tokens["admin"])
    # One request, so that the admin token is in this process's memory.
    assert app.test_client().get("/spawner/v1/labs", headers=admin).status_code == 200
    memory = (
        "lab_spawner_gafaelfawr_lookups_total",
        frozenset({"answer": "token_info", "source": "memory"}.items()),
    )
    before = _scrape(app)
    assert app.test_client().get("/spawner/v1/labs", headers=admin).status_code == 200
    after = _scrape(app)
    assert after[memory] == before.get(memory, 0) + 1
    # The state is read from Redis at each scrape: a lab record written there is counted.
    prefix = app.config["SPAWNER"].redis.key_prefix
    redis_client.sadd(f"{prefix}labs", "someone")
    redis_client.set(f"{prefix}lab:someone", '{"status": "running"}')
    running = ("lab_spawner_workloads", frozenset({"kind": "lab", "status": "running"}.items()))
    assert _scrape(app)[running] == before.get(running, 0) + 1


def test_scrape_without_redis_still_answers_the_counters(
    app: Flask, redis_server: RedisServer
) -> None:
    redis_server.stop()
    try:
        samples = _scrape(app)
    finally:
        redis_server.start()
    names = {name for name, _ in samples}
    assert "lab_spawner_redis_round_trips_total" in names
    assert "lab_spawner_workloads" not in names
    assert (
        samples[("lab_spawner_redis_errors_total", frozenset({"error": "connection"}.items()))] >= 1
    )

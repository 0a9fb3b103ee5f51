"""The request id middleware around a Flask app: every answer carries the id, and every
record logged while serving the request names it."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from flask import Flask, request

from app.log import ContextFilter, current_request_id
from app.web import request_id
from app.web.request_id import note_user

SENT = "0f8b2c1d9e7a4b3c8d6e5f4a3b2c1d0e"


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.addFilter(ContextFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def app() -> Flask:
    app = Flask(__name__)
    request_id.init_app(app)
    environs: list[dict[str, Any]] = []
    app.config["ENVIRONS"] = environs

    @app.get("/labs/<username>")
    def lab(username: str) -> dict[str, Any]:
        note_user(username)
        environs.append(request.environ)
        logging.getLogger("tests.logs").warning("serving %s", username)
        return {"request_id": current_request_id()}

    @app.get("/boom")
    def boom() -> str:
        raise RuntimeError("boom")

    return app


@pytest.fixture
def records() -> Any:
    handler = _Collect()
    logger = logging.getLogger("tests.logs")
    logger.addHandler(handler)
    yield handler.records
    logger.removeHandler(handler)


def test_a_sent_id_is_answered_and_named_in_the_records(app: Flask, records: Any) -> None:
    response = app.test_client().get("/labs/rachel", headers={"X-Request-Id": SENT})
    assert response.headers["X-Request-Id"] == SENT
    assert response.json == {"request_id": SENT}
    [record] = records
    assert (record.request_id, record.user) == (SENT, "rachel")
    [environ] = app.config["ENVIRONS"]
    assert environ["spawner.request_id"] == SENT
    assert environ["spawner.user"] == "rachel"
    assert environ["spawner.route"] == "/labs/<username>"


def test_a_request_without_one_gets_its_own(app: Flask) -> None:
    client = app.test_client()
    first = client.get("/labs/rachel").headers["X-Request-Id"]
    second = client.get("/labs/rachel", headers={"X-Request-Id": "bad id"}).headers
    assert len(first) == 32 and second["X-Request-Id"] not in (first, "bad id")
    # Nothing of a request stays behind for the next one.
    assert current_request_id() is None


def test_errors_carry_the_id_too(app: Flask) -> None:
    app.config["PROPAGATE_EXCEPTIONS"] = False
    client = app.test_client()
    assert client.get("/nowhere", headers={"X-Request-Id": SENT}).headers["X-Request-Id"] == SENT
    failed = client.get("/boom", headers={"X-Request-Id": SENT})
    assert failed.status_code == 500
    assert failed.headers["X-Request-Id"] == SENT

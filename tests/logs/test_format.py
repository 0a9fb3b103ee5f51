"""Log lines: the JSON and text formats, the log context, request ids and redaction."""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from typing import Any

import pytest

from app.log import (
    ContextFilter,
    JsonFormatter,
    RedactingFilter,
    TextFormatter,
    accept_request_id,
    current_request_id,
    logging_context,
    new_request_id,
)
from app.models.workload import Action, Operation, WorkloadRef
from app.web.access_log import access_entry, access_line

TOKEN = "gt-" + "A" * 22 + "." + "B" * 22


def _record(message: str, *args: Any, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise RuntimeError(f"failed with {TOKEN}")
        except RuntimeError:
            import sys

            exc_info = sys.exc_info()
    record = logging.LogRecord("app.test", logging.WARNING, __file__, 1, message, args, exc_info)
    RedactingFilter().filter(record)
    ContextFilter().filter(record)
    return record


def test_a_sane_request_id_is_kept() -> None:
    for value in ("0f8b2c1d9e7a4b3c8d6e5f4a3b2c1d0e", "a", "req-1.2_3", "x" * 128):
        assert accept_request_id(value) == value


@pytest.mark.parametrize(
    "value",
    [None, "", "x" * 129, "two words", "new\nline", '"quoted"', "-leading", "é", TOKEN],
)
def test_an_insane_request_id_is_replaced(value: str | None) -> None:
    made = accept_request_id(value)
    assert made != value
    assert len(made) == 32 and int(made, 16) >= 0


def test_new_request_ids_differ() -> None:
    assert len({new_request_id() for _ in range(100)}) == 100


def test_json_line_names_the_context_and_redacts() -> None:
    with logging_context(request_id="req-1", operation="op-1", workload="lab:rachel"):
        record = _record("spawn with %s", f"Bearer {TOKEN}", exc=True)
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "app.test"
    assert entry["request_id"] == "req-1"
    assert entry["operation"] == "op-1"
    assert entry["workload"] == "lab:rachel"
    assert "user" not in entry
    assert entry["message"] == "spawn with [redacted]"
    assert "RuntimeError: failed with [redacted]" in entry["exception"]
    assert TOKEN not in line
    assert dt.datetime.fromisoformat(entry["time"]).tzinfo is not None


def test_text_line_ends_with_the_context() -> None:
    with logging_context(request_id="req-2", user="rachel"):
        line = TextFormatter().format(_record("hello %s", TOKEN))
    first = line.splitlines()[0]
    assert first.endswith("hello [redacted] request=req-2 user=rachel")
    without = TextFormatter().format(_record("plain"))
    assert without.endswith("] plain")


def test_the_context_ends_with_its_block_and_stays_in_its_thread() -> None:
    seen: list[str | None] = []
    with logging_context(request_id="outer"):
        with logging_context(request_id="inner"):
            assert current_request_id() == "inner"
        assert current_request_id() == "outer"
        thread = threading.Thread(target=lambda: seen.append(current_request_id()))
        thread.start()
        thread.join()
    assert current_request_id() is None
    assert seen == [None]


def test_an_operation_keeps_the_request_that_queued_it() -> None:
    operation = Operation("op", WorkloadRef("lab", "rachel"), Action.SPAWN, 1.0, 2.0, {}, "req-3")
    stored = json.loads(json.dumps(operation.to_json()))
    assert Operation.from_json(stored) == operation
    # One queued before request ids (a rolling update) reads as having none.
    del stored["request_id"]
    assert Operation.from_json(stored).request_id is None


class _Response:
    status = "303 SEE OTHER"
    sent = 0


def _environ(**extra: str) -> dict[str, Any]:
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/spawner/v1/labs/rachel/spawn",
        "QUERY_STRING": f"token={TOKEN}&grace_seconds=5",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "10.0.0.1",
        **extra,
    }


def test_the_access_entry_has_every_field() -> None:
    environ = _environ(
        **{
            "spawner.request_id": "req-4",
            "spawner.user": "rachel",
            "spawner.route": "/spawner/v1/labs/<username>/spawn",
        }
    )
    entry = access_entry(_Response(), environ, dt.timedelta(seconds=1, microseconds=2500), pid=7)
    assert entry.pop("time")
    assert entry == {
        "level": "INFO",
        "logger": "access",
        "pid": 7,
        "message": "POST /spawner/v1/labs/rachel/spawn 303",
        "request_id": "req-4",
        "user": "rachel",
        "method": "POST",
        "path": "/spawner/v1/labs/rachel/spawn",
        "query": "token=[redacted]&grace_seconds=5",
        "route": "/spawner/v1/labs/<username>/spawn",
        "status": 303,
        "size": 0,
        "duration_ms": 1002,
        "client": "10.0.0.1",
        "protocol": "HTTP/1.1",
    }


def test_the_text_access_line_names_request_and_user() -> None:
    environ = _environ(**{"spawner.request_id": "req-5", "spawner.user": "rachel"})
    environ["PATH_INFO"] = f"/spawner/v1/labs/{TOKEN}"
    line = access_line(_Response(), environ, dt.timedelta(milliseconds=3))
    assert line == (
        '10.0.0.1 "POST /spawner/v1/labs/[redacted]?token=[redacted]&grace_seconds=5 HTTP/1.1"'
        " 303 0 3ms request=req-5 user=rachel"
    )

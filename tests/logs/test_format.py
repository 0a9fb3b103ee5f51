"""Log lines: the JSON and text formats, the log context, request ids and redaction."""

from __future__ import annotations

import datetime as dt
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gunicorn.config import Config

from app.log import (
    ContextFilter,
    JsonFormatter,
    RedactingFilter,
    TextFormatter,
    accept_request_id,
    configure_logging,
    current_request_id,
    iso_time,
    json_lines,
    logging_context,
    new_request_id,
    redact,
)
from app.models.workload import Action, Operation, WorkloadRef
from app.web.access_log import AccessLogger, access_entry, access_json, access_line

ROOT = Path(__file__).resolve().parents[2]

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


@pytest.mark.parametrize(
    "text",
    [
        f"before {TOKEN} after",
        "Authorization: BeArEr abc.def after",
        "é bearer abc after",
        f"é {TOKEN} after",
    ],
)
def test_redaction_finds_credentials_in_any_case_and_charset(text: str) -> None:
    cleaned = redact(text)
    assert "[redacted]" in cleaned
    assert TOKEN not in cleaned and "abc" not in cleaned


def test_a_line_without_credentials_is_left_alone() -> None:
    for text in ("GET /spawner/v1/labs/rachel 200", "the bearer's name", "gt-short é"):
        assert redact(text) == text


def test_timestamps_match_the_calendar_across_seconds() -> None:
    start = 1_764_225_322.0
    for step in range(0, 3000, 7):
        moment = start + step / 1000 + 0.0004
        expected = dt.datetime.fromtimestamp(moment, dt.UTC)
        text = iso_time(moment)
        assert text == expected.strftime("%Y-%m-%dT%H:%M:%S.") + (
            f"{expected.microsecond // 1000:03d}Z"
        )


@pytest.fixture
def text_lines() -> Iterator[None]:
    """Text lines, whatever format an earlier test of the run configured last."""
    was = "json" if json_lines() else "text"
    level = logging.getLevelName(logging.getLogger().level)
    configure_logging("INFO", "text")
    yield
    configure_logging(level, was)


def _access_logger(path: Path, **settings: Any) -> AccessLogger:
    cfg = Config()
    cfg.set("accesslog", str(path))
    for name, value in settings.items():
        cfg.set(name, value)
    return AccessLogger(cfg)


@pytest.mark.usefixtures("text_lines")
def test_the_access_logger_writes_its_lines_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    logger = _access_logger(path)
    environ = _environ(**{"spawner.request_id": "req-6"})
    environ["PATH_INFO"] = f"/spawner/v1/labs/{TOKEN}"
    logger.access(_Response(), None, environ, dt.timedelta(milliseconds=4))
    logger.access(_Response(), None, _environ(), dt.timedelta(milliseconds=5))
    lines = path.read_text().splitlines()
    assert lines == [
        '10.0.0.1 "POST /spawner/v1/labs/[redacted]?token=[redacted]&grace_seconds=5 HTTP/1.1"'
        " 303 0 4ms request=req-6",
        '10.0.0.1 "POST /spawner/v1/labs/rachel/spawn?token=[redacted]&grace_seconds=5 '
        'HTTP/1.1" 303 0 5ms',
    ]


@pytest.mark.usefixtures("text_lines")
def test_a_configured_access_log_keeps_its_handlers(tmp_path: Path) -> None:
    """With a logging configuration of the operator's, lines go through ``logging``, so
    its handlers and formats apply."""
    path = tmp_path / "configured.log"
    handler = {"class": "logging.FileHandler", "filename": str(path), "formatter": "tagged"}
    config = {
        "formatters": {"tagged": {"format": "access: %(message)s"}},
        "handlers": {"file": handler, "console": {"class": "logging.NullHandler"}},
        "loggers": {"gunicorn.access": {"handlers": ["file"], "propagate": False}},
    }
    names = ("", "gunicorn.error", "gunicorn.access")
    saved = {name: list(logging.getLogger(name).handlers) for name in names}
    levels = {name: logging.getLogger(name).level for name in names}
    try:
        logger = _access_logger(tmp_path / "unused.log", logconfig_dict=config)
        logger.access(_Response(), None, _environ(), dt.timedelta(milliseconds=6))
        for made in logging.getLogger("gunicorn.access").handlers:
            made.flush()
        assert path.read_text().startswith('access: 10.0.0.1 "POST /spawner/v1/labs/rachel')
    finally:
        for name in names:
            log = logging.getLogger(name)
            for made in list(log.handlers):
                if made not in saved[name]:
                    made.close()
            log.handlers[:] = saved[name]
            log.setLevel(levels[name])


def test_the_json_access_line_is_json_and_redacted() -> None:
    environ = _environ(**{"spawner.user": 'ra"chel\n'})
    environ["PATH_INFO"] = f"/spawner/v1/labs/{TOKEN}/é"
    line = access_json(_Response(), environ, dt.timedelta(milliseconds=7), pid=9)
    assert "\n" not in line and TOKEN not in line
    entry = json.loads(line)
    assert entry["user"] == 'ra"chel\n'
    assert entry["path"] == "/spawner/v1/labs/[redacted]/é"
    assert entry["message"] == "POST /spawner/v1/labs/[redacted]/é 303"
    assert (entry["status"], entry["size"], entry["duration_ms"]) == (303, 0, 7)
    assert dt.datetime.fromisoformat(entry["time"]).tzinfo is not None


TURN_SCRIPT = """
from gevent import monkey

monkey.patch_all()

import datetime as dt
import json
import sys

import gevent
from gunicorn.config import Config

from app.web.access_log import AccessLogger


class Response:
    status = "200 OK"
    sent = 2


path = sys.argv[1]
cfg = Config()
cfg.set("accesslog", path)
logger = AccessLogger(cfg)


# Fifty requests end in one turn of the loop, then the main greenlet gives way for one.
for index in range(50):
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": f"/r/{index}",
               "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "10.0.0.1"}
    logger.access(Response(), None, environ, dt.timedelta(milliseconds=1))
during = open(path).read()
gevent.sleep(0)
after = open(path).read()
print(json.dumps({"during": during, "after": after}))
"""


def test_a_gevent_workers_lines_of_one_turn_go_out_together_at_its_end(tmp_path: Path) -> None:
    """In a gevent worker the lines of one turn of the event loop are written at the end of
    that turn, in the order their requests ended: none before, all after."""
    path = tmp_path / "access.log"
    done = subprocess.run(
        [sys.executable, "-c", TURN_SCRIPT, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(done.stdout)
    assert seen["during"] == ""
    written = [line.split()[2] for line in seen["after"].splitlines()]
    assert written == [f"/r/{index}" for index in range(50)]

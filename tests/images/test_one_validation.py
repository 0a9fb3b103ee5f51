"""Two replicas of the service, one Redis: when both refresh the same image list at once, each
digest is recorded once and validated by one operation only."""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from flask import Flask

from app.config import Config, parse_config
from app.extensions.labs import machinery_of
from app.workloads.image.records import parse_image
from app.workloads.refs import IMAGE_KIND
from tests.conftest import simple_image
from tests.labs.conftest import lab_raw_config

__all__ = ["lab_raw_config"]


def test_two_replicas_refreshing_at_once_queue_one_validation_per_digest(
    lab_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="app.workloads.image.lifecycle")
    raw = copy.deepcopy(lab_raw_config)
    url = f"registry.test/lsstsqre/sciplat-lab:validated-{time.time_ns()}"
    block = {
        "name": "validated",
        "type": "simple",
        "images": [simple_image(url, "Under test")],
        "validation": {"command": ["/bin/true"], "timeoutSeconds": 30},
    }
    raw["prepull"] = [*raw["prepull"], block]
    config = parse_config(raw)
    replicas = [machinery_of(make_app(config)) for _ in range(2)]
    source = next(b for b in config.prepull if b.name == "validated")
    start = threading.Barrier(len(replicas))

    def refresh(index: int) -> None:
        start.wait()
        replicas[index].images.refresh(source)

    threads = [threading.Thread(target=refresh, args=(i,)) for i in range(len(replicas))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    digest = simple_image(url, "")["digest"]
    # Both replicas tried; the validation was queued by one of them only.
    said = [r.getMessage() for r in caplog.records]
    assert len([m for m in said if digest in m and m.endswith(" discovered")]) == 1
    store = replicas[0].engine.store
    records = {d: parse_image(r) for d, r in store.records(IMAGE_KIND).items()}
    assert [r.state.value for r in records[digest].history][:1] == ["discovered"]
    pending = [ref for ref in store.pending() if ref.kind == IMAGE_KIND and ref.name == digest]
    assert len(pending) <= 1

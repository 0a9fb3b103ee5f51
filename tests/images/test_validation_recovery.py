"""A validation survives its worker and Redis: killed mid-run, another worker finishes it from
the pods it finds; with Redis emptied mid-run, the image is validated anew. Either way there
is exactly one result, and no validation pod is left behind. Each source validates with a
command that takes a few seconds, so there is a moment to strike."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import requests

from devstack.stack import LocalStack, StackOptions
from tests.images.stacks import admin_get
from tests.labs.conftest import wait_for

SLOW = ["python", "-c", "import time; time.sleep(3); print('passed')"]


def source(name: str, tag: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "simple",
        "images": [{"url": f"127.0.0.1:8192/lsstsqre/simple-lab:{tag}", "name": tag}],
        "validation": {"command": SLOW, "timeoutSeconds": 60},
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("validation-recovery"),
        real_labs=True,
        workers=2,
        pull_seconds=0.1,
        config_overrides={
            "prepull": [source("killed", "2.0"), source("flushed", "1.1")],
            "images": {"refreshSeconds": 1},
            "operations": {"leaseSeconds": 2, "scanSeconds": 0.5},
            "watcher": {"leaseSeconds": 2, "reconcileSeconds": 2},
        },
    )
    local = LocalStack(options).start()
    yield local
    local.stop()


def record_of(local: LocalStack, name: str) -> dict[str, Any] | None:
    found = admin_get(local, "/images/records") or []
    return next((r for r in found if r["source"] == name), None)


def validation_pods(local: LocalStack) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in local.kube.store.list("pods")
        if (p["metadata"].get("labels") or {}).get("app.kubernetes.io/component")
        == "image-validation"
    ]


def finished(local: LocalStack, name: str) -> dict[str, Any] | None:
    record = record_of(local, name)
    return record if record and record["state"] in ("validated", "rejected") else None


def validating_again(local: LocalStack, name: str) -> dict[str, Any]:
    """Once the source's first validation is over, ask for another and wait until its
    command runs: what the test strikes at."""
    first = wait_for(lambda: finished(local, name), timeout=60, interval=0.1)
    token = local.state()["tokens"]["admin-user"]["token"]
    response = requests.post(
        f"{local.spawner_url}/spawner/v1/images/records/{first['digest']}/revalidate",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert response.status_code == 202, response.text
    running: dict[str, Any] = wait_for(
        lambda: (r := record_of(local, name)) and r["state"] == "validating" and r,
        timeout=60,
        interval=0.05,
    )
    return running


@pytest.mark.slow
def test_a_killed_workers_validation_is_finished_by_another(stack: LocalStack) -> None:
    store = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    running = validating_again(stack, "killed")
    before = [t["state"] for t in running["history"]].count("validated")
    holder = str(wait_for(lambda: store.get(f"spawner:lease:image:{running['digest']}")))
    os.kill(int(holder.split(":")[1]), signal.SIGKILL)

    done = wait_for(lambda: finished(stack, "killed"), timeout=60, interval=0.2)
    assert done["state"] == "validated"
    states = [t["state"] for t in done["history"]]
    # One result for the validation the killed worker began, none rejected.
    assert states.count("validated") == before + 1 and "rejected" not in states
    wait_for(lambda: not validation_pods(stack), timeout=30)


@pytest.mark.slow
def test_redis_emptied_mid_validation_validates_once_and_leaks_nothing(
    stack: LocalStack,
) -> None:
    validating_again(stack, "flushed")
    assert validation_pods(stack)
    redis.Redis.from_url(stack.redis_url).flushall()

    done = wait_for(lambda: finished(stack, "flushed"), timeout=90, interval=0.2)
    assert done["state"] == "validated"
    states = [t["state"] for t in done["history"]]
    assert states == ["discovered", "pulling", "validating", "validated"]
    wait_for(lambda: not validation_pods(stack), timeout=30)

"""Killing the gunicorn worker that leads the prepuller: another worker takes over, adopts
the pulls in flight, finishes the prepull set, and leaves no pull pod behind."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import requests

from devstack.stack import LocalStack, StackOptions
from tests.labs.conftest import wait_for

LEASE_KEY = "spawner:leader:prepuller"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("devstack-prepull"),
        workers=2,
        # What the killed runner was doing, its successor (started again, as the kubelet
        # would) takes over.
        nodes=3,
        pull_seconds=1.5,
        config_overrides={
            "prepuller": {"intervalSeconds": 0.2, "leaseSeconds": 2, "pullsPerNode": 1},
        },
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()


def _pull_pods(stack: LocalStack) -> list[dict[str, Any]]:
    return [
        pod
        for pod in stack.kube.store.list("pods", "nublado")
        if pod["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "prepull"
    ]


def test_killing_the_prepuller_leader_hands_over_and_leaves_no_stray_pods(
    stack: LocalStack,
) -> None:
    store = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    admin = {"Authorization": f"Bearer {stack.state()['tokens']['admin']['token']}"}
    url = f"{stack.spawner_url}/spawner/v1/prepulls"

    # Pulls are under way (each takes 1.5 s): kill the leader in the middle of them.
    wait_for(lambda: _pull_pods(stack), timeout=30)
    leader = json.loads(wait_for(lambda: store.get(LEASE_KEY), timeout=10))
    pid = int(leader["worker_pid"])
    os.kill(pid, signal.SIGKILL)

    # Another worker leads within about a lease and finishes the job.
    def successor() -> Any:
        value = store.get(LEASE_KEY)
        held = json.loads(value) if value else None
        return held if held and held["owner"] != leader["owner"] else None

    taken = wait_for(successor, timeout=20)
    assert int(taken["worker_pid"]) != pid
    assert taken["token"] > leader["token"]

    def finished() -> Any:
        status = requests.get(url, headers=admin, timeout=5).json()
        configs = status["configs"]
        # Done: every configuration's list has been read and none of its images is pending.
        if not status["updated"] or any(
            c["images"]["pending"] or not c["images"]["prepulled"] for c in configs
        ):
            return None
        return status

    status = wait_for(finished, timeout=60)
    eligible = [node["name"] for node in status["nodes"] if node["eligible"]]
    assert len(eligible) == 3
    for config in status["configs"]:
        assert config["images"]["prepulled"]
        for entry in config["images"]["prepulled"]:
            assert sorted(entry["nodes"]) == sorted(eligible)
    wait_for(lambda: not _pull_pods(stack), timeout=20)

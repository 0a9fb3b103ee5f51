"""The local-stack page's failover walk-through, done as the page says: ``make run`` with
``SPAWNER_REPLICAS=3``, ``kill -9`` of the replica that leads the lab watcher (its web
master's and runner's pids from ``stack.json``, and the web's workers), then another replica
leads its loops and takes its requests, and the stack goes on until Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from devstack.redis_process import free_port
from devstack.stack import REPO_ROOT
from tests.labs.conftest import wait_for
from tests.stack.test_no_orphans import _descendants
from tests.support.real_labs import spawn_recommended


def _leaders(state: dict[str, Any]) -> dict[str, str | None]:
    """Each elected loop and the replica leading it, through the balancer."""
    admin = state["tokens"]["admin"]["token"]
    answer = requests.get(
        f"{state['spawner_url']}/spawner/v1/leaders",
        headers={"Authorization": f"Bearer {admin}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return {
        entry["loop"]: (entry["leader"] or {}).get("replica", {}).get("name")
        for entry in answer.json()
    }


@pytest.mark.slow
def test_a_replica_killed_as_the_page_says_is_left_down_and_the_others_take_over(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SPAWNER_REDIS_URL"}
    env.update({"SPAWNER_REPLICAS": "3", "SPAWNER_PORT": str(free_port())})
    errors = (tmp_path / "stderr.log").open("w")
    stack = subprocess.Popen(
        [sys.executable, "-m", "devstack", "--state-dir", str(tmp_path)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )
    try:
        assert stack.stdout is not None
        for line in stack.stdout:
            if "Ctrl-C stops everything" in line:
                break
        else:
            pytest.fail("the stack exited at start-up")
        state = json.loads((tmp_path / "stack.json").read_text())
        replicas = {r["name"]: r for r in state["replicas"]}
        assert len(replicas) == 3
        leading = wait_for(lambda: _leaders(state).get("lab-watcher"), timeout=30)

        # kill -9 the leader's web master, its workers and its runner: a lost pod.
        for victim in (replicas[leading]["pid"], replicas[leading]["runner_pid"]):
            for pid in (victim, *_descendants(victim)):
                os.kill(pid, signal.SIGKILL)

        def moved() -> bool:
            try:
                now = _leaders(state)
            except requests.RequestException:
                return False
            return all(name not in (None, leading) for name in now.values())

        wait_for(moved, timeout=60, interval=0.5)
        # The stack goes on, and says what happened to the replica.
        assert stack.poll() is None
        log = (tmp_path / "stderr.log").read_text()
        assert f"{leading} was killed by SIGKILL; it stays down" in log, log[-2000:]
        # Requests through the balancer reach the others: a spawn is answered and runs.
        rachel = state["tokens"]["rachel"]["token"]
        spawn_recommended(state["spawner_url"], rachel, "rachel")
        admin = {"Authorization": f"Bearer {state['tokens']['admin']['token']}"}
        lab = f"{state['spawner_url']}/spawner/v1/labs/rachel"
        wait_for(
            lambda: requests.get(lab, headers=admin, timeout=10).json()["status"] == "running",
            timeout=90,
        )

        stack.send_signal(signal.SIGINT)
        assert stack.wait(timeout=60) == 0
    finally:
        if stack.poll() is None:
            stack.kill()
            stack.wait()
        errors.close()

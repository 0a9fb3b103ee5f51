"""Three replicas behind the balancer: who leads what, a leader replica killed during a
storm, and a replica stopped with SIGTERM during one.

Every spawn completes with exactly one pod per user whatever happens to the replica that took
its POST or ran its operation: an operation's lease expires with its worker and another
replica's scanner resumes it, and an elected loop's lease moves to a replica still alive.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import pytest
import requests

from devstack.stack import LocalStack
from tests.labs.conftest import wait_for
from tests.scaleout.conftest import LEASE_SECONDS
from tests.scaleout.storm import add_users, await_running, lab_pods_per_user, start_storm

LOOPS = {"lab-watcher", "image-refresher", "prepuller"}
MOVE_BOUND = 15.0
"""Seconds within which every loop of a dead replica must lead elsewhere (the goal)."""


def admin_token(stack: LocalStack) -> str:
    return str(stack.state()["tokens"]["admin"]["token"])


def leaders(stack: LocalStack, url: str | None = None) -> dict[str, Any]:
    response = requests.get(
        f"{url or stack.spawner_url}/spawner/v1/leaders",
        headers={"Authorization": f"Bearer {admin_token(stack)}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return {entry["loop"]: entry["leader"] for entry in response.json()}


def all_led(stack: LocalStack) -> dict[str, Any] | None:
    found = leaders(stack)
    return found if all(found.values()) else None


def test_the_stack_lists_its_replicas_and_every_replica_reports_the_same_leaders(
    stack: LocalStack,
) -> None:
    state = json.loads((stack.options.state_dir / "stack.json").read_text())
    assert [r["name"] for r in state["replicas"]] == ["spawner-1", "spawner-2", "spawner-3"]
    assert state["spawner_url"] == stack.spawner_url
    assert len({r["url"] for r in state["replicas"]} | {state["spawner_url"]}) == 4

    found = wait_for(lambda: all_led(stack), timeout=30)
    assert set(found) == LOOPS
    by_name = {r["name"]: r for r in state["replicas"]}
    for leader in found.values():
        replica = by_name[leader["replica"]["name"]]
        # Led by a runner, one process: the replica's pid and the worker's are its own.
        assert (leader["replica"]["url"], leader["replica"]["pid"]) == (
            replica["url"],
            replica["runner_pid"],
        )
        assert int(leader["worker_pid"]) == replica["runner_pid"]
        assert 0 < leader["expires_in"] <= LEASE_SECONDS
        assert leader["token"] >= 1
    # Asked of each replica directly, the answer is the same: it is what Redis holds.
    for replica in state["replicas"]:
        direct = leaders(stack, replica["url"])
        assert {loop: d["worker"] for loop, d in direct.items()} == {
            loop: f["worker"] for loop, f in found.items()
        }

    # Requests are spread: consecutive calls through the balancer reach every replica.
    session = requests.Session()
    served = set()
    for _ in range(6):
        response = session.get(f"{stack.spawner_url}/healthz", timeout=5)
        served.add(response.headers.get("X-Spawner-Replica"))
    assert served == {"spawner-1", "spawner-2", "spawner-3"}


@pytest.mark.timeout(300)
def test_killing_the_leader_replica_during_a_storm_loses_no_spawn_and_moves_leadership(
    stack: LocalStack,
) -> None:
    admin = admin_token(stack)
    tokens = add_users(stack, "kill", 100, first_uid=41000)
    before = wait_for(lambda: all_led(stack), timeout=30)
    victim_name = before["lab-watcher"]["replica"]["name"]
    victim = stack.replica_named(victim_name)
    moved_from = {
        loop for loop, leader in before.items() if leader["replica"]["name"] == victim_name
    }

    with ThreadPoolExecutor(max_workers=50) as pool:
        storm, futures = start_storm(stack, tokens, pool)
        # Mid-storm: a third of the spawns answered, most of them still in progress.
        wait_for(lambda: len(storm.answers) >= 30, timeout=60, interval=0.01)
        killed_at = time.monotonic()
        stack.kill_replica(victim)

        def moved() -> dict[str, Any] | None:
            found = all_led(stack)
            if found is None:
                return None
            if any(found[loop]["replica"]["name"] == victim_name for loop in moved_from):
                return None
            return found

        after = wait_for(moved, timeout=MOVE_BOUND, interval=0.1)
        moved_in = time.monotonic() - killed_at
        wait(futures)

    users = list(tokens)
    assert sorted(storm.accepted()) == sorted(users), storm.refusals
    for loop in moved_from:
        assert after[loop]["replica"]["name"] != victim_name
        assert after[loop]["token"] > before[loop]["token"]
    assert moved_in < MOVE_BOUND

    await_running(stack, admin, users, timeout=120)
    assert set(lab_pods_per_user(stack, users).values()) == {1}

    stack.start_replica(victim)


@pytest.mark.timeout(300)
def test_a_replica_stopped_with_sigterm_during_a_storm_hands_its_work_over(
    stack: LocalStack,
) -> None:
    admin = admin_token(stack)
    tokens = add_users(stack, "term", 60, first_uid=42000)
    victim = stack.replicas[1]

    with ThreadPoolExecutor(max_workers=30) as pool:
        storm, futures = start_storm(stack, tokens, pool)
        wait_for(lambda: len(storm.answers) >= 20, timeout=60, interval=0.01)
        code = stack.stop_replica(victim)
        wait(futures)

    assert code == 0
    users = list(tokens)
    assert sorted(storm.accepted()) == sorted(users)

    await_running(stack, admin, users, timeout=120)
    assert set(lab_pods_per_user(stack, users).values()) == {1}
    stack.start_replica(victim)

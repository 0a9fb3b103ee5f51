"""A replica stopped with SIGTERM hands its running operations over at once.

Operations' leases here last a minute, and every lab takes its kubelet seconds to start, so
the stopped replica's spawns are mid-way when it stops. Had it only let its leases expire,
they would wait a minute for another replica; handed over, they finish well within it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import requests

from devstack.stack import LocalStack, StackOptions
from tests.labs.conftest import wait_for
from tests.scaleout.storm import add_users, await_running, lab_pods_per_user, spawn

OPERATION_LEASE = 60.0


@pytest.fixture(scope="module")
def handover_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("devstack-handover"),
        replicas=2,
        workers=1,
        nodes=3,
        start_seconds=8.0,
        config_overrides={
            "operations": {"leaseSeconds": OPERATION_LEASE, "scanSeconds": 1},
            "limits": {"mutationsPerMinute": 1000},
        },
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()


def in_progress(stack: LocalStack, admin: str, url: str) -> dict[str, str | None]:
    """Each operation in progress: its user and the worker holding it."""
    response = requests.get(
        f"{url}/spawner/v1/operations", headers={"Authorization": f"Bearer {admin}"}, timeout=10
    )
    response.raise_for_status()
    return {op["username"]: op["worker"] for op in response.json()}


@pytest.mark.timeout(180)
def test_sigterm_hands_running_spawns_over_before_their_leases_expire(
    handover_stack: LocalStack,
) -> None:
    stack = handover_stack
    admin = str(stack.state()["tokens"]["admin"]["token"])
    tokens = add_users(stack, "hand", 12, first_uid=43000)
    deadline = time.monotonic() + 60
    for user, token in tokens.items():
        assert spawn(stack, user, token, deadline, {})[-1] == 303
    victim, survivor = stack.replicas

    def all_in_progress() -> dict[str, str | None] | None:
        found = in_progress(stack, admin, survivor.url)
        return found if len(found) == 12 else None

    running = wait_for(all_in_progress, timeout=30)
    # The spawns are spread over the replicas' runners: some run on the one about to stop.
    workers = {str(pid) for pid in victim.runner_pids()}
    on_victim = [u for u, worker in running.items() if worker and worker.split(":")[1] in workers]
    assert 0 < len(on_victim) < 12

    stopped_at = time.monotonic()
    assert stack.stop_replica(victim) == 0
    users = list(tokens)

    await_running(stack, admin, users, timeout=OPERATION_LEASE - 15)
    assert time.monotonic() - stopped_at < OPERATION_LEASE
    assert set(lab_pods_per_user(stack, users).values()) == {1}
    stack.start_replica(victim)

"""Fair admission across replicas: three groups' bursts, sent through the balancer so that
every replica queues some of them, are admitted round-robin between the groups and in
arrival order within each, by whichever replica frees a place.

Every lab takes its kubelet three seconds to start, so two places are held while the bursts
arrive and the rest wait in the one queue in Redis.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
import requests

from devstack.demo import add_load_users
from devstack.gafaelfawr import GroupSpec
from devstack.stack import LocalStack, StackOptions
from tests.admission.conftest import AdmissionLog
from tests.labs.conftest import wait_for
from tests.scaleout.storm import await_running

GROUPS = ["holders", "team-a", "team-b", "team-c"]


@pytest.fixture(scope="module")
def fair_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("devstack-admission"),
        replicas=3,
        workers=1,
        nodes=3,
        start_seconds=3.0,
        config_overrides={
            "admission": {"maxInProgress": 2, "groups": GROUPS},
            "limits": {"mutationsPerMinute": 1000},
        },
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()


@pytest.mark.timeout(180)
def test_bursts_through_the_balancer_are_admitted_fairly(fair_stack: LocalStack) -> None:
    stack = fair_stack
    members: dict[str, list[str]] = {}
    tokens: dict[str, str] = {}
    for index, (group, count) in enumerate(
        [("holders", 2), ("team-a", 6), ("team-b", 2), ("team-c", 1)]
    ):
        names = [f"{group.replace('-', '')}{n}" for n in range(count)]
        tokens |= add_load_users(
            stack.gafaelfawr,
            names,
            first_uid=45000 + 100 * index,
            group=GroupSpec(group, 4500 + index),
        )
        members[group] = names
    a, b, c = members["team-a"], members["team-b"], members["team-c"]
    body = {"options": {"image": stack.demo_image, "size": "small"}, "env": {}}
    log = AdmissionLog(redis.Redis.from_url(stack.redis_url, decode_responses=True))
    served_by: set[str] = set()
    try:
        # The holders take the two places; the rest arrive interleaved and wait.
        for user in [*members["holders"], *a[:3], b[0], b[1], c[0], *a[3:]]:
            response = requests.post(
                f"{stack.spawner_url}/spawner/v1/labs/{user}/spawn",
                json=body,
                headers={"Authorization": f"Bearer {tokens[user]}"},
                allow_redirects=False,
                timeout=30,
            )
            assert response.status_code == 303, response.text
            served_by.add(response.headers["X-Spawner-Replica"])
        # One turn admits one of each group waiting, in arrival order within the group.
        expected = [a[0], b[0], c[0], a[1], b[1], a[2], a[3], a[4], a[5]]
        wait_for(lambda: len(log.read()) >= len(expected), timeout=90)
        assert log.admitted == expected
    finally:
        log.close()
    admin = str(stack.state()["tokens"]["admin"]["token"])
    await_running(stack, admin, list(tokens), timeout=90)
    assert served_by == {"spawner-1", "spawner-2", "spawner-3"}

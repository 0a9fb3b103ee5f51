"""A storm of spawns against a sick API server: every spawn ends, and nothing leaks.

The emulator fails a tenth of all requests (500s, 429s with ``Retry-After``, and requests
held past the client's timeout, then dropped), drawn from a seeded generator so a run is
repeatable. Every spawn must end ``running`` or ``failed`` with a reason, at least 99% of
them running; each user then has exactly one lab pod, and deleting every lab (with the API
healthy again) leaves no namespace behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask

from app.builders.names import MANAGED_BY, MANAGED_BY_LABEL
from app.config import Config, parse_config
from devstack.kube import KubernetesEmulator
from tests.labs.conftest import LabUser, read_events, spawn_body, wait_for

USERS = 100
SETTLED = {"running", "failed"}


EXTRA_NODES = [f"storm-node-{i}" for i in range(6)]
"""Room for a hundred labs besides the shared cluster's three nodes."""


@pytest.fixture
def sick_api(kube: KubernetesEmulator) -> Iterator[KubernetesEmulator]:
    for node in EXTRA_NODES:
        kube.cluster.add_node(node)
    kube.faults.seed(16)
    kube.faults.fail(0.04, code=500)
    kube.faults.fail(0.03, code=429)
    kube.faults.time_out(0.03, hold=1.2)
    yield kube
    kube.faults.clear()
    kube.faults.seed(0)
    for node in EXTRA_NODES:
        kube.cluster.remove_node(node)


def _ours(kube: KubernetesEmulator, resource: str, namespace: str | None = None) -> list[Any]:
    return [
        o
        for o in kube.store.list(resource, namespace)
        if (o["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
    ]


def test_every_spawn_ends_and_nothing_leaks_when_a_tenth_of_calls_fail(
    lab_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    sick_api: KubernetesEmulator,
) -> None:
    lab_raw_config["kubernetes"] = {**lab_raw_config.get("kubernetes", {}), "requestTimeout": 1.0}
    lab_raw_config["lab"]["spawnTimeout"] = 120
    client = make_app(parse_config(lab_raw_config)).test_client()
    users = [new_user() for _ in range(USERS)]
    for user in users:
        response = client.post(
            f"/spawner/v1/labs/{user.username}/spawn", json=spawn_body(), headers=user.headers
        )
        assert response.status_code == 303, response.get_data(as_text=True)

    def status(user: LabUser) -> dict[str, Any]:
        body: dict[str, Any] = client.get(
            f"/spawner/v1/labs/{user.username}", headers=admin_headers
        ).get_json()
        return body

    wait_for(lambda: all(status(u)["status"] in SETTLED for u in users), timeout=110, interval=0.2)
    final = {u.username: status(u) for u in users}
    failed = {name: s.get("error") for name, s in final.items() if s["status"] == "failed"}
    assert all(failed.values()), f"a failed lab without a reason: {failed}"
    assert len(failed) <= USERS // 100, f"{len(failed)} of {USERS} failed: {failed}"
    for user in users:
        events = read_events(client, user.username, user.headers)
        assert events[-1].type in ("complete", "failed")
        namespace = f"nublado-{user.username}"
        pods = _ours(sick_api, "pods", namespace)
        if final[user.username]["status"] == "running":
            assert [p["metadata"]["name"] for p in pods] == [f"nb-{user.username}-lab"]
        else:
            assert len(pods) <= 1

    sick_api.faults.clear()
    for user in users:
        url = f"/spawner/v1/labs/{user.username}"
        assert client.delete(url, headers=admin_headers).status_code == 202
    wait_for(
        lambda: all(
            client.get(f"/spawner/v1/labs/{u.username}", headers=admin_headers).status_code == 404
            for u in users
        ),
        timeout=60,
        interval=0.2,
    )
    names = {f"nublado-{u.username}" for u in users}
    left = [ns["metadata"]["name"] for ns in _ours(sick_api, "namespaces")]
    assert not names & set(left), f"namespaces left behind: {sorted(names & set(left))}"

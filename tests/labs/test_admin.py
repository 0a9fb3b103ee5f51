"""The administrators' view of operations in progress."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Flask

from app.config import Config, parse_config
from app.extensions.labs import machinery_of
from devstack.kube import KubernetesEmulator
from tests.labs.conftest import LabUser, read_events, spawn_body, wait_for


def test_operations_lists_the_running_spawn_and_its_worker(
    lab_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
    slow_image: Callable[[float], str],
) -> None:
    slow = slow_image(1.0)
    app = make_app(parse_config(lab_raw_config))
    client = app.test_client()
    user = new_user()
    assert client.get("/spawner/v1/operations", headers=user.headers).status_code == 403
    response = client.post(
        f"/spawner/v1/labs/{user.username}/spawn",
        json=spawn_body(image=slow),
        headers=user.headers,
    )
    assert response.status_code == 303

    def mine_with_worker() -> list[dict[str, Any]]:
        operations = client.get("/spawner/v1/operations", headers=admin_headers).get_json()
        found = [o for o in operations if o["username"] == user.username]
        return found if found and found[0]["worker"] else []

    mine = wait_for(mine_with_worker, timeout=5)
    assert len(mine) == 1
    assert mine[0]["kind"] == "spawn"
    assert mine[0]["deadline"] > mine[0]["started"]
    runner = machinery_of(app).engine.runner
    assert mine[0]["worker"] == runner.owner
    assert read_events(client, user.username, user.headers)[-1].type == "complete"
    operations = client.get("/spawner/v1/operations", headers=admin_headers).get_json()
    assert not [o for o in operations if o["username"] == user.username]

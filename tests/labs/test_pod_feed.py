"""Spawns follow their pods on the runner's shared watch of lab pods (``app.engine.feeds``),
not on a watch each: one watch request for many spawns, none per lab namespace."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask

from app.config import Config
from app.extensions.labs import machinery_of
from app.workloads.lab.tracking import LAB_POD_SELECTOR
from devstack.kube import KubernetesEmulator
from tests.labs.conftest import LabUser, read_events, spawn_body

SPAWNS = 6


def test_spawns_at_once_follow_their_pods_on_one_shared_watch(
    config: Config,
    make_app: Callable[[Config], Flask],
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
) -> None:
    app = make_app(config)
    client = app.test_client()
    users = [new_user() for _ in range(SPAWNS)]
    kube.audit.clear()
    for user in users:
        response = client.post(
            f"/spawner/v1/labs/{user.username}/spawn", json=spawn_body(), headers=user.headers
        )
        assert response.status_code == 303, response.get_data(as_text=True)
    for user in users:
        events = read_events(client, user.username, user.headers)
        assert events[-1].type == "complete", [e.data for e in events]

    namespaces = {f"nublado-{user.username}" for user in users}
    per_pod = [
        entry
        for entry in kube.audit.entries(verb="watch", resource="pods")
        if entry.namespace in namespaces
    ]
    assert per_pod == []
    feed = machinery_of(app).context.feeds.feed("pods", LAB_POD_SELECTOR)
    assert 1 <= feed.watch_requests < SPAWNS
    assert feed.following == 0

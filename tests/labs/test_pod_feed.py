"""Spawns follow their pods, and deletes their namespaces, on the runner's shared watches
(``app.engine.feeds``), not on a watch each: a few watch requests for many operations."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask

from app.builders.names import OURS_SELECTOR
from app.config import Config
from app.extensions.labs import machinery_of
from app.workloads.lab.tracking import LAB_POD_SELECTOR
from devstack.kube import KubernetesEmulator
from tests.labs.conftest import LabUser, read_events, spawn_body

SPAWNS = 6


def test_spawns_and_deletes_at_once_wait_on_shared_watches(
    config: Config,
    make_app: Callable[[Config], Flask],
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
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
    feeds = machinery_of(app).context.feeds
    pods = feeds.feed("pods", LAB_POD_SELECTOR)
    assert 1 <= pods.watch_requests < SPAWNS
    assert pods.following == 0

    kube.audit.clear()
    for user in users:
        url = f"/spawner/v1/labs/{user.username}"
        assert client.delete(url, headers=admin_headers).status_code == 202
    for user in users:
        events = read_events(client, user.username, user.headers)
        assert events[-1].type == "complete", [e.data for e in events]
    assert not namespaces & {ns["metadata"]["name"] for ns in kube.store.list("namespaces")}
    namespace_feed = feeds.feed("namespaces", OURS_SELECTOR)
    assert 1 <= namespace_feed.watch_requests < SPAWNS
    assert len(kube.audit.entries(verb="watch", resource="namespaces")) < SPAWNS

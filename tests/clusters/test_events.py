"""A cluster's events, as a lab's: a stream of each operation that replays, resumes after a
``Last-Event-ID`` and ends with the operation, for its owner and administrators only."""

from __future__ import annotations

from collections.abc import Callable

from flask.testing import FlaskClient

from tests.clusters.conftest import create, with_lab
from tests.labs.conftest import LabUser, read_stream, wait_for


def test_a_clusters_creation_and_deletion_stream_replay_and_resume(
    client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    user = new_user()
    with_lab(client, user)
    name = create(client, user).get_json()["name"]
    url = f"/spawner/v1/labs/{user.username}/clusters/{name}/events"

    created = read_stream(client, url, user.headers)
    assert created[0].type == "info" and f"{name} requested" in created[0].data
    assert created[-1].type == "complete"
    assert [e.type for e in created].count("complete") == 1
    status = client.get(f"/spawner/v1/labs/{user.username}/clusters/{name}", headers=user.headers)
    assert status.get_json()["status"] == "running", "complete means running"

    resumed = read_stream(client, url, admin_headers, last_id=created[0].id)
    assert [(e.id, e.type, e.data) for e in resumed] == [
        (e.id, e.type, e.data) for e in created[1:]
    ]

    assert client.delete(url.removesuffix("/events"), headers=user.headers).status_code == 202
    deleted = read_stream(client, url, user.headers)
    assert deleted[0].data == f"Deletion of cluster {name} requested"
    assert deleted[-1].type == "complete"
    wait_for(
        lambda: client.get(url.removesuffix("/events"), headers=user.headers).status_code == 404
    )


def test_a_clusters_stream_is_its_owners_and_refuses_what_it_cannot_follow(
    client: FlaskClient, new_user: Callable[..., LabUser]
) -> None:
    user, stranger = new_user(), new_user()
    with_lab(client, user)
    name = create(client, user).get_json()["name"]
    url = f"/spawner/v1/labs/{user.username}/clusters/{name}/events"

    assert client.get(url, headers=stranger.headers).status_code == 403
    missing = client.get(
        f"/spawner/v1/labs/{user.username}/clusters/dask-000000/events", headers=user.headers
    )
    assert missing.status_code == 404
    assert missing.get_json()["message"] == f"user {user.username} has no cluster dask-000000"
    bad = client.get(url, headers={**user.headers, "Last-Event-ID": "yesterday"})
    assert (bad.status_code, bad.get_json()["field"]) == (422, "Last-Event-ID")

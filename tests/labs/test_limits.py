"""The callers' caps: event streams open at once, and changes a minute; never JupyterHub's."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.config import Config, parse_config
from tests.labs.conftest import LabUser, read_events, spawn_body


@pytest.fixture
def limited_client(
    lab_raw_config: dict[str, Any], make_app: Callable[[Config], Flask]
) -> FlaskClient:
    lab_raw_config["limits"] = {"streamsPerUser": 3, "mutationsPerMinute": 4}
    return make_app(parse_config(lab_raw_config)).test_client()


@pytest.fixture
def open_streams() -> Iterator[list[TestResponse]]:
    streams: list[TestResponse] = []
    yield streams
    for stream in streams:
        stream.close()


def test_a_users_event_streams_are_capped_and_a_closed_one_frees_its_place(
    limited_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    open_streams: list[TestResponse],
) -> None:
    user, other = new_user(), new_user()
    for someone in (user, other):
        url = f"/spawner/v1/labs/{someone.username}/spawn"
        assert (
            limited_client.post(url, json=spawn_body(), headers=someone.headers).status_code == 303
        )
        assert read_events(limited_client, someone.username, someone.headers)[-1].type == "complete"
    events = f"/spawner/v1/labs/{user.username}/events"

    def open_stream(headers: dict[str, str], url: str = events) -> TestResponse:
        response = limited_client.get(url, headers=headers, buffered=False)
        open_streams.append(response)
        return response

    for _ in range(3):
        assert open_stream(user.headers).status_code == 200
    refused = open_stream(user.headers)
    assert refused.status_code == 429
    assert refused.get_json()["code"] == "too_many_requests"
    assert int(refused.headers["Retry-After"]) >= 1
    # The cap is the caller's: JupyterHub (an administrator) still follows the lab, and
    # another user their own.
    for _ in range(4):
        assert open_stream(admin_headers).status_code == 200
    other_events = f"/spawner/v1/labs/{other.username}/events"
    assert open_stream(other.headers, other_events).status_code == 200

    open_streams[0].close()
    assert open_stream(user.headers).status_code == 200
    assert open_stream(user.headers).status_code == 429


def test_a_users_changes_are_capped_per_minute_and_refusals_are_not_counted(
    limited_client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    user, other = new_user(), new_user()
    url = f"/spawner/v1/labs/{user.username}"
    # Refused before any work (a bad body, a lab that exists): given back, never counted.
    for _ in range(10):
        bad = limited_client.post(f"{url}/spawn", json={"options": {}}, headers=user.headers)
        assert bad.status_code == 422
    for round_ in range(4):
        spawned = limited_client.post(f"{url}/spawn", json=spawn_body(), headers=user.headers)
        assert spawned.status_code == 303, spawned.get_json()
        assert read_events(limited_client, user.username, user.headers)[-1].type == "complete"
        if round_ < 3:  # (the fourth spawn used the last change of the minute)
            exists = limited_client.post(f"{url}/spawn", json=spawn_body(), headers=user.headers)
            assert exists.status_code == 409
        # JupyterHub's deletes are not the user's changes, and are never capped.
        assert limited_client.delete(url, headers=admin_headers).status_code == 202
        assert read_events(limited_client, user.username, user.headers)[-1].type == "complete"
    refused = limited_client.post(f"{url}/spawn", json=spawn_body(), headers=user.headers)
    assert refused.status_code == 429
    assert refused.get_json()["code"] == "too_many_requests"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # Nothing was queued by the refused spawn, and another user is not affected.
    assert limited_client.get(url, headers=admin_headers).status_code == 404
    other_url = f"/spawner/v1/labs/{other.username}/spawn"
    assert (
        limited_client.post(other_url, json=spawn_body(), headers=other.headers).status_code == 303
    )


def test_an_owners_flood_never_blocks_jupyterhubs_delete_or_its_event_stream(
    limited_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    open_streams: list[TestResponse],
) -> None:
    """The owner of a lab sends bad bodies by the dozen and holds every stream they may:
    JupyterHub, with its own token, still follows the lab and deletes it."""
    user = new_user()
    url = f"/spawner/v1/labs/{user.username}"
    assert (
        limited_client.post(f"{url}/spawn", json=spawn_body(), headers=user.headers).status_code
        == 303
    )
    for _ in range(40):
        limited_client.post(f"{url}/spawn", json={"options": {"size": 1}}, headers=user.headers)
    while True:
        stream = limited_client.get(f"{url}/events", headers=user.headers, buffered=False)
        open_streams.append(stream)
        if stream.status_code == 429:
            break
    hub_stream = limited_client.get(f"{url}/events", headers=admin_headers, buffered=False)
    open_streams.append(hub_stream)
    assert hub_stream.status_code == 200
    deleted = limited_client.delete(url, headers=admin_headers)
    assert deleted.status_code == 202, deleted.get_json()
    assert read_events(limited_client, user.username, admin_headers)[-1].type == "complete"
    assert limited_client.get(url, headers=admin_headers).status_code == 404


def test_a_refused_stream_holds_no_place(
    limited_client: FlaskClient, new_user: Callable[..., LabUser]
) -> None:
    user = new_user()
    events = f"/spawner/v1/labs/{user.username}/events"
    for _ in range(5):
        assert limited_client.get(events, headers=user.headers).status_code == 404


def test_the_largest_env_a_request_may_send_still_makes_a_lab(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], kube: Any
) -> None:
    """The request's bounds keep the env ConfigMap below the 1 MiB the API server (and the
    emulator) allows, whatever the platform adds to it."""
    plain = {f"BIG_{i}": "x" * 1000 for i in range(64)}  # 64 KB of plain text
    escaped = {f"CTL_{i}": "\x01" * 160 for i in range(64)}  # each character six as JSON
    for env in (plain, escaped):
        assert 60 * 1024 < len(json.dumps(env)) <= 64 * 1024
        user = new_user()
        response = lab_client.post(
            f"/spawner/v1/labs/{user.username}/spawn",
            json={**spawn_body(), "env": env},
            headers=user.headers,
        )
        assert response.status_code == 303, response.get_data(as_text=True)
        events = read_events(lab_client, user.username, user.headers)
        assert events[-1].type == "complete", events[-1].data
        namespace = f"nublado-{user.username}"
        config_map = kube.store.get("configmaps", namespace, f"nb-{user.username}-env")
        assert config_map is not None and set(env) <= set(config_map["data"])

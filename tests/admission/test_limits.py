"""The limits beside admission: a group's creations a minute, and a worker's open event
streams in all; and admission turned off admitting whatever was left waiting."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from tests.admission.conftest import AdmissionLog, Member, spawn
from tests.labs.conftest import read_events, spawn_body, wait_for


@pytest.fixture
def open_streams() -> Iterator[list[TestResponse]]:
    streams: list[TestResponse] = []
    yield streams
    for stream in streams:
        stream.close()


def test_a_groups_creations_are_capped_per_minute_across_its_members(
    admission_app: Callable[..., FlaskClient],
    member: Callable[[str], Member],
    admin_headers: dict[str, str],
) -> None:
    client = admission_app({}, limits={"groupMutationsPerMinute": 3})
    for _ in range(3):
        assert spawn(client, member("busy-group")) == 303
    refused_user = member("busy-group")
    url = f"/spawner/v1/labs/{refused_user.username}"
    refused = client.post(
        f"{url}/spawn",
        json=spawn_body(),
        headers=refused_user.headers,
    )
    assert refused.status_code == 429
    assert refused.get_json()["code"] == "too_many_requests"
    assert "busy-group" in refused.get_json()["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # Nothing was queued, and another group is not affected.
    assert client.get(url, headers=admin_headers).status_code == 404
    assert spawn(client, member("quiet-group")) == 303


def test_a_workers_event_streams_are_capped_in_all(
    admission_app: Callable[..., FlaskClient],
    member: Callable[[str], Member],
    admin_headers: dict[str, str],
    open_streams: list[TestResponse],
) -> None:
    client = admission_app({}, limits={"streamsPerWorker": 3})
    users = [member("streamers") for _ in range(3)]
    for user in users:
        assert spawn(client, user) == 303
        assert read_events(client, user.username, user.headers)[-1].type == "complete"

    def open_stream(user: Member) -> TestResponse:
        response = client.get(
            f"/spawner/v1/labs/{user.username}/events", headers=user.headers, buffered=False
        )
        open_streams.append(response)
        return response

    # Each user is far below their own cap; the worker's is what refuses.
    assert open_stream(users[0]).status_code == 200
    assert open_stream(users[1]).status_code == 200
    feed = client.get("/spawner/v1/admin/stream", headers=admin_headers, buffered=False)
    open_streams.append(feed)
    assert feed.status_code == 200
    refused = open_stream(users[2])
    assert refused.status_code == 429
    assert refused.get_json()["code"] == "too_many_requests"
    assert int(refused.headers["Retry-After"]) >= 1
    assert client.get("/spawner/v1/admin/stream", headers=admin_headers).status_code == 429
    # A closed stream, the administrators' feed too, frees its place.
    feed.close()
    assert open_stream(users[2]).status_code == 200
    open_streams[0].close()
    assert open_stream(users[0]).status_code == 200
    assert open_stream(users[1]).status_code == 429


def test_turning_admission_off_admits_what_was_left_waiting(
    admission_app: Callable[..., FlaskClient],
    member: Callable[[str], Member],
    held_image: str,
    admission_log: AdmissionLog,
    admin_headers: dict[str, str],
) -> None:
    limited = admission_app({"maxInProgress": 1})
    holder, waiting = member("g-one"), member("g-two")
    assert spawn(limited, holder, held_image) == 303
    assert spawn(limited, waiting) == 303
    # A replica started with admission off (a rolling change of the setting) lets it go,
    # though the place is still held.
    unlimited = admission_app({"maxInProgress": 0})
    wait_for(lambda: admission_log.read() == [waiting.username])
    assert read_events(unlimited, waiting.username, waiting.headers)[-1].type == "complete"
    response = limited.delete(f"/spawner/v1/labs/{holder.username}", headers=admin_headers)
    assert response.status_code == 202

"""An app's events: its creation and changes as streams, for its group's members only."""

from __future__ import annotations

from collections.abc import Callable

from flask.testing import FlaskClient

from tests.apps.conftest import create, in_phase
from tests.labs.conftest import LabUser, read_stream


def test_an_apps_operations_stream_to_its_groups_members(
    client: FlaskClient,
    new_group: Callable[[], str],
    member: Callable[[str], LabUser],
    admin_headers: dict[str, str],
) -> None:
    group = new_group()
    user, outsider = member(group), member(new_group())
    app_id = create(client, user, group).get_json()["id"]
    url = f"/spawner/v1/apps/{app_id}/events"

    created = read_stream(client, url, user.headers)
    assert created[-1].type == "complete"
    in_phase(client, user, app_id, "Ready")
    again = read_stream(client, url, admin_headers)
    assert [e.id for e in again] == [e.id for e in created]
    resumed = read_stream(client, url, user.headers, last_id=created[0].id)
    assert [e.id for e in resumed] == [e.id for e in created[1:]]
    assert client.get(url, headers=outsider.headers).status_code == 403

    stop = client.post(f"/spawner/v1/apps/{app_id}/stop", headers=user.headers)
    assert stop.status_code == 202
    stopping = read_stream(client, url, user.headers)
    assert stopping[0].id not in {e.id for e in created}, "a new operation, a new stream"
    assert stopping[-1].type == "complete"
    assert (
        client.get("/spawner/v1/apps/no-such-app/events", headers=user.headers).status_code == 404
    )

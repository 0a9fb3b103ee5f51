"""Each lab route with each scope case, and request validation."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from flask.testing import FlaskClient

from tests.conftest import bearer
from tests.labs.conftest import LabUser, read_events, spawn_body

ADMIN_ROUTES = [
    ("GET", "/spawner/v1/labs"),
    ("GET", "/spawner/v1/labs/{user}"),
    ("DELETE", "/spawner/v1/labs/{user}"),
]


@pytest.mark.parametrize(("method", "path"), ADMIN_ROUTES)
def test_admin_routes_refuse_users_and_anonymous(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], method: str, path: str
) -> None:
    user = new_user()
    url = path.format(user=user.username)
    assert lab_client.open(url, method=method).status_code == 401
    response = lab_client.open(url, method=method, headers=user.headers)
    assert response.status_code == 403
    assert "admin:notebook" in response.get_json()["message"]


def test_spawn_requires_the_users_own_token(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], tokens: dict[str, str]
) -> None:
    owner, other = new_user(), new_user()
    url = f"/spawner/v1/labs/{owner.username}/spawn"
    assert lab_client.post(url, json=spawn_body()).status_code == 401
    assert lab_client.post(url, json=spawn_body(), headers=other.headers).status_code == 403
    # Not even JupyterHub's admin token may spawn for a user: it needs the user's delegation.
    admin = lab_client.post(url, json=spawn_body(), headers=bearer(tokens["admin"]))
    assert admin.status_code == 403
    readonly = new_user(scopes=("read:image",))
    response = lab_client.post(
        f"/spawner/v1/labs/{readonly.username}/spawn", json=spawn_body(), headers=readonly.headers
    )
    assert response.status_code == 403


def test_events_for_owner_or_admin_only(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
) -> None:
    owner, other = new_user(), new_user()
    response = lab_client.post(
        f"/spawner/v1/labs/{owner.username}/spawn", json=spawn_body(), headers=owner.headers
    )
    assert response.status_code == 303
    url = f"/spawner/v1/labs/{owner.username}/events"
    assert lab_client.get(url).status_code == 401
    assert lab_client.get(url, headers=other.headers).status_code == 403
    assert read_events(lab_client, owner.username, admin_headers)[-1].type == "complete"
    assert read_events(lab_client, owner.username, owner.headers)[-1].type == "complete"


def test_user_status_and_missing_labs(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    user = new_user()
    assert lab_client.get("/spawner/v1/user-status").status_code == 401
    response = lab_client.get("/spawner/v1/user-status", headers=user.headers)
    assert response.status_code == 404
    assert response.get_json()["code"] == "not_found"
    url = f"/spawner/v1/labs/{user.username}"
    assert lab_client.get(url, headers=admin_headers).status_code == 404
    assert lab_client.delete(url, headers=admin_headers).status_code == 404
    events = lab_client.get(f"{url}/events", headers=admin_headers)
    assert events.status_code == 404


@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        (spawn_body(image="registry.test/other:latest"), "options.image", "unknown image"),
        (spawn_body(size="gigantic"), "options.size", "sizes are: small, large"),
        (spawn_body(colour="blue"), "options.colour", "Unknown field"),
        ({"options": {"size": "small"}}, "options.image", "choose an image"),
        ({"options": {"image": "x", "size": "small"}, "env": {"A": 1}}, "env.A", ""),
        ({"options": {"image": "x", "size": "small"}, "extra": 1}, "extra", "Unknown field"),
        (spawn_body(debug="perhaps"), "options.debug", "must be true or false"),
    ],
)
def test_bad_spawn_bodies_name_the_field(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    body: dict[str, object],
    field: str,
    fragment: str,
) -> None:
    user = new_user()
    response = lab_client.post(
        f"/spawner/v1/labs/{user.username}/spawn", json=body, headers=user.headers
    )
    assert response.status_code == 422
    error = response.get_json()
    assert error["code"] == "invalid_request"
    assert error["field"].startswith(field)
    assert fragment in error["message"]
    # Nothing was recorded or half-created.
    url = f"/spawner/v1/labs/{user.username}"
    assert lab_client.get(url, headers=admin_headers).status_code == 404


def test_body_must_be_json_object(
    lab_client: FlaskClient, new_user: Callable[..., LabUser]
) -> None:
    user = new_user()
    url = f"/spawner/v1/labs/{user.username}/spawn"
    for data in ("not json", "[1, 2]"):
        response = lab_client.post(
            url, data=data, headers={**user.headers, "Content-Type": "application/json"}
        )
        assert response.status_code == 422
        assert "JSON object" in response.get_json()["message"]


def test_bad_last_event_id(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    user = new_user()
    response = lab_client.get(
        f"/spawner/v1/labs/{user.username}/events",
        headers={**admin_headers, "Last-Event-ID": "yesterday"},
    )
    assert response.status_code == 422
    assert response.get_json()["field"] == "Last-Event-ID"

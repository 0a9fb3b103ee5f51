"""Each lab route with each scope case, and request validation."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.extensions.labs import machinery_of
from app.storage.events import EventType
from app.workloads.lab.store import lab_ref
from tests.conftest import bearer
from tests.labs.conftest import LabUser, read_events, spawn_body


def _with_env(env: dict[str, str]) -> dict[str, object]:
    return {**spawn_body(), "env": env}


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
        # Only what can never be a variable is refused (platform and start-up names are
        # screened instead: tests/labs/test_objects.py).
        (_with_env({"1ABC": "x"}), "env.1ABC", "environment variable name"),
        (_with_env({"A-B": "x"}), "env.A-B", "environment variable name"),
        (_with_env({"": "x"}), "env.", "environment variable name"),
        (_with_env({"A=B": "x"}), "env.A=B", "environment variable name"),
        # Bounded so the env ConfigMap can never pass Kubernetes' 1 MiB object limit.
        (_with_env({"BIG": "x" * (65 * 1024)}), "env", "bytes in all as JSON"),
        (_with_env({"CTL": "\x01" * (11 * 1024)}), "env", "bytes in all as JSON"),
        (_with_env({f"V{i}": "1" for i in range(1000)}), "env", "at most 256 variables"),
        (_with_env({"N" * 200: "1"}), "env.", "Longer than maximum length 128"),
        # NUL bytes reach no Kubernetes object.
        (_with_env({"SITE": "a\x00b"}), "env.SITE", "NUL bytes"),
        (spawn_body(size="small\x00"), "options.size", "NUL bytes"),
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


@pytest.mark.parametrize("depth", [9, 2000, 50_000])
def test_a_deeply_nested_body_is_refused_not_a_crash(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], depth: int
) -> None:
    """Nesting is bounded before any schema sees the body; past the parser's own recursion
    limit the body is refused as not JSON, never a 500."""
    user = new_user()
    body = '{"options": ' * depth + "{}" + "}" * depth
    response = lab_client.post(
        f"/spawner/v1/labs/{user.username}/spawn",
        data=body,
        headers={**user.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    message = response.get_json()["message"]
    assert "nests deeper than 8 levels" in message or "JSON object" in message


def test_a_body_over_the_limit_is_413_before_it_is_read(
    lab_client: FlaskClient, new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> None:
    user = new_user()
    url = f"/spawner/v1/labs/{user.username}/spawn"
    body = json.dumps(_with_env({"SITE": "x" * (2 * 1024 * 1024)}))
    response = lab_client.post(
        url, data=body, headers={**user.headers, "Content-Type": "application/json"}
    )
    assert response.status_code == 413
    error = response.get_json()
    assert error["code"] == "body_too_large"
    assert str(1024 * 1024) in error["message"]
    assert (
        lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers).status_code
        == 404
    )


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


def test_resuming_after_an_id_never_sent_is_refused(
    lab_app: Flask, lab_client: FlaskClient, new_user: Callable[..., LabUser]
) -> None:
    """While an operation runs, a Last-Event-ID later than its newest event would wait for
    events that come with smaller ids and are skipped: it is refused instead."""
    user = new_user()
    events = machinery_of(lab_app).engine.events
    subject = lab_ref(user.username).key
    events.append(subject, EventType.INFO, "under way")
    newest = events.last(subject)
    assert newest is not None
    millis, _, _ = newest.id.partition("-")
    url = f"/spawner/v1/labs/{user.username}/events"
    later = lab_client.get(url, headers={**user.headers, "Last-Event-ID": f"{int(millis) + 1}-0"})
    assert later.status_code == 422
    assert "later than any event" in later.get_json()["message"]

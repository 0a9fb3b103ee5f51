"""Property-based tests of every route against the service's own OpenAPI document.

schemathesis reads the document the app serves and generates requests from it, valid and
invalid, for every operation; each answer must be no server error, a status the document
lists for that operation, and a body of the documented content type and schema. It runs
twice: with JupyterHub's administrator token, and with a user's token. Path usernames are
drawn from the real users (the caller, another user, one that does not exist) as well as
generated, so requests get past authorization and reach the routes' own logic, labs with
state included. Examples are bounded and derandomized, so a run is repeatable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis
import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from app.config import Config, parse_config
from tests.conftest import bearer
from tests.labs.conftest import LabUser, read_events, spawn_body

MAX_EXAMPLES = 40
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def fuzz_app(
    lab_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    new_user: Callable[..., LabUser],
) -> tuple[Flask, list[LabUser]]:
    """An app where two users have running labs, so status and events have state; the
    caps are raised so generated spawns and deletes do not all end at the per-minute cap."""
    raw = lab_raw_config
    raw["limits"] = {"mutationsPerMinute": 100_000, "streamsPerUser": 1000}
    app = make_app(parse_config(raw))
    client = app.test_client()
    users = [new_user(), new_user()]
    for user in users:
        url = f"/spawner/v1/labs/{user.username}/spawn"
        assert client.post(url, json=spawn_body(), headers=user.headers).status_code == 303
        assert read_events(client, user.username, user.headers)[-1].type == "complete"
    return app, users


def _schema(app: Flask, token: str, usernames: list[str]) -> Any:
    schema = schemathesis.openapi.from_wsgi("/spawner/v1/openapi.json", app)

    @schema.hook
    def map_path_parameters(context: Any, path_parameters: dict[str, Any] | None) -> Any:
        if path_parameters and "username" in path_parameters:
            # Mostly real users; the generated value (valid or not) the rest of the time.
            index = sum(map(ord, str(path_parameters["username"]))) % (len(usernames) + 1)
            if index < len(usernames):
                path_parameters["username"] = usernames[index]
        return path_parameters

    @schema.hook
    def map_headers(context: Any, headers: dict[str, Any] | None) -> dict[str, Any]:
        return {**(headers or {}), **bearer(token)}

    # The administrators' live feed never ends: a generated request would wait forever.
    # Maintenance mode refuses every spawn after it with 503 until it is turned off, and a
    # reconcile asked for waits for the elected watcher: both are tested on their own.
    return (
        schema.exclude(path="/spawner/v1/admin/stream")
        .exclude(method="PUT", path="/spawner/v1/admin/maintenance")
        .exclude(method="POST", path="/spawner/v1/admin/reconcile")
    )


@pytest.fixture
def admin_schema(fuzz_app: tuple[Flask, list[LabUser]], tokens: dict[str, str]) -> Any:
    app, users = fuzz_app
    return _schema(app, tokens["admin"], [u.username for u in users] + ["nobody-here"])


@pytest.fixture
def user_schema(fuzz_app: tuple[Flask, list[LabUser]]) -> Any:
    app, users = fuzz_app
    owner, other = users
    token = owner.headers["Authorization"].removeprefix("Bearer ")
    return _schema(app, token, [owner.username, owner.username, other.username])


_SETTINGS = hypothesis.settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def _fuzz(schema: Any) -> list[str]:
    """Run every operation's generated cases; what failed, one line per operation.

    Operations run one after another in this test, rather than as test items of their own
    through schemathesis's pytest plugin, whose collection hooks reach into pytest's private
    node attributes."""
    failures = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @hypothesis.given(case=operation.as_strategy())
        @_SETTINGS
        def run(case: Any) -> None:
            case.call_and_validate(checks=CHECKS)

        try:
            run()
        except Exception as exc:  # every operation is tried; the failures are reported
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert operations >= 13
    return failures


def test_every_route_with_the_admin_token(admin_schema: Any) -> None:
    failures = _fuzz(admin_schema)
    assert not failures, "\n\n".join(failures)


def test_every_route_with_a_users_token(user_schema: Any) -> None:
    failures = _fuzz(user_schema)
    assert not failures, "\n\n".join(failures)

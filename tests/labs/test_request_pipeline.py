"""Every route keeps the lab routes' promises, walked from the OpenAPI document.

The routes are not listed here: they are read from the document the service serves, so a
route added anywhere is sent the same bad bodies and asked the same questions during a
rebuild, and fails here if its blueprint does not keep the promise.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app import create_app
from app.config import parse_config
from app.extensions import api_ext
from app.extensions.labs import start_background, stop_background
from app.web.bodies import MAX_DEPTH
from tests.conftest import await_complete_state
from tests.fileservers.conftest import with_fileservers
from tests.labs.conftest import LabUser

PATH_VALUES = {
    "kind": "daskclusters",
    "name": "nobodys-cluster",
    "kernel_id": str(uuid.UUID(int=1)),
    "app_id": "nobodys-app",
    "digest": "sha256:" + "a" * 64,
}
"""What a path's parameters hold, besides ``username`` (the caller's own): names of
nothing, so that a route that answered without its records would answer 404 or 200 empty."""

QUERY_VALUES = {"started_at": "2026-01-01T00:00:00Z"}
"""Required query parameters, with values the route accepts."""

NOT_REBUILT = {
    "/healthz": "liveness: the process answers",
    "/readyz": "says `state: rebuilding` itself (503 `not_ready`)",
    "/metrics": "the process's own counters",
    "/spawner/v1/openapi.json": "the document",
    "/spawner/v1/docs": "the document's page",
    "/spawner/v1/spawn-form/{username}": "built from the configuration and image lists",
    "/spawner/v1/lab-form/{username}": "built from the configuration and image lists",
    "/spawner/v1/app-templates": "the configuration",
    "/spawner/v1/images": "the configuration and the image lists, re-read by the refresher",
    "/spawner/v1/images/records": "validation records live in Redis only, made anew by the "
    "refresher; Kubernetes has nothing to rebuild them from",
    "/spawner/v1/images/records/{digest}": "as the records",
    "/spawner/v1/prepulls": "read from the nodes",
    "/spawner/v1/operations": "operations in flight live in Redis only; the reconcile "
    "settles what they left",
    "/spawner/v1/leaders": "the elections under way",
    "/spawner/v1/admin/stream": "events from now on",
    "/spawner/v1/admin/audit": "the audit trail lives in Redis and the logs only",
    "/spawner/v1/admin/maintenance": "the switch lives in Redis only",
    "/spawner/v1/admin/pod": "read from Kubernetes",
}
"""Read routes that do not answer from the workloads' records, and why: every other read
route must answer 503 ``rebuilding`` while the records are rebuilt, never 404 or a short
list."""


def _operations(app: Flask) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    for path, items in api_ext.document(app)["paths"].items():
        for method, operation in items.items():
            if method != "parameters":
                yield method.upper(), path, operation


def _url(path: str, operation: Mapping[str, Any], username: str) -> str:
    url = path.replace("{username}", username)
    for name, value in PATH_VALUES.items():
        url = url.replace("{" + name + "}", value)
    assert "{" not in url, f"no value for a parameter of {path}"
    query = [
        f"{p['name']}={QUERY_VALUES[p['name']]}"
        for p in operation.get("parameters", ())
        if p.get("in") == "query" and p.get("required")
    ]
    return url + ("?" + "&".join(query) if query else "")


def _code(body: Mapping[str, Any]) -> str:
    """The error's code, in the service's body or in nublado's."""
    if "detail" in body:
        return str(body["detail"][0]["type"])
    return str(body["code"])


def _identities(
    new_user: Callable[..., LabUser], admin_headers: dict[str, str]
) -> tuple[LabUser, list[dict[str, str]]]:
    """A user (with the file servers' scope too), and the headers of everyone who may call
    some route: the user, an administrator, and an operator with maintenance pods' scope."""
    user = new_user(scopes=("exec:notebook", "write:files"))
    operator = new_user(scopes=("admin:lab-pods",))
    return user, [user.headers, admin_headers, operator.headers]


def _nested(levels: int) -> bytes:
    return ('{"a":' * levels + "1" + "}" * levels).encode()


def test_every_body_route_refuses_nested_oversized_and_nul_bodies_before_its_view(
    lab_app: Flask,
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
) -> None:
    """Sent with every identity: a body nested past the parser's recursion, one a level
    deeper than the service's bodies may nest, one over the size limit and one with a NUL
    each get the blueprint's 4xx naming the problem, and nothing is created."""
    user, identities = _identities(new_user, admin_headers)
    limit = lab_app.config["MAX_CONTENT_LENGTH"]
    # The service's 422, the scaler design's 400, nublado's name for a 422.
    unusable = {"invalid_request", "bad_request", "value_error"}
    bodies = {
        "recursion": (_nested(5000), unusable),
        "depth": (_nested(MAX_DEPTH + 1), unusable),
        "size": (json.dumps({"a": "x" * limit}).encode(), {"body_too_large"}),
        "nul": (json.dumps({"image": "a\x00b"}).encode(), unusable),
    }
    routes = [(m, p, o) for m, p, o in _operations(lab_app) if "requestBody" in o]
    assert len(routes) >= 9, "the document lists the body routes"
    for method, path, operation in routes:
        url = _url(path, operation, user.username)
        for what, (body, codes) in bodies.items():
            for headers in identities:
                answer = lab_client.open(
                    url,
                    method=method,
                    data=body,
                    headers={**headers, "Content-Type": "application/json"},
                )
                assert 400 <= answer.status_code < 500, (method, path, what, answer.status_code)
                assert _code(answer.get_json()) in codes, (method, path, what, answer.get_json())
                if what == "nul":
                    assert "NUL" in answer.get_data(as_text=True), (method, path)

    # Nothing was made on the way.
    listed = lab_client.get("/spawner/v1/labs", headers=admin_headers).get_json()
    assert user.username not in listed
    assert lab_client.get("/spawner/v1/apps", headers=admin_headers).get_json() == []
    clusters = lab_client.get(f"/spawner/v1/labs/{user.username}/clusters", headers=user.headers)
    assert clusters.get_json() == []


@pytest.fixture
def rebuilding_app(lab_raw_config: dict[str, Any]) -> Iterator[Flask]:
    """An app on an empty Redis whose background work has not started: nothing rebuilds
    its records, so it stays as a service is right after Redis came back empty."""
    app = create_app(parse_config(with_fileservers(lab_raw_config)))
    yield app


def test_every_read_route_answers_rebuilding_while_the_records_are_rebuilt(
    rebuilding_app: Flask,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
) -> None:
    """Asked by everyone who may ask, during a rebuild, about the caller's own names: each
    read route that answers from the records says 503 ``rebuilding`` with ``Retry-After``
    (and declares it), never 404 or an empty list; the rest are the listed exceptions."""
    client = rebuilding_app.test_client()
    user, identities = _identities(new_user, admin_headers)
    reads = [(p, o) for m, p, o in _operations(rebuilding_app) if m == "GET"]
    assert set(NOT_REBUILT) <= {p for p, _ in reads}, "an exception names no route"
    for path, operation in reads:
        if path in NOT_REBUILT:
            continue
        url = _url(path, operation, user.username)
        statuses = []
        for headers in identities:
            answer = client.get(url, headers=headers, buffered=False)
            try:
                statuses.append(answer.status_code)
                if answer.status_code in (401, 403):
                    continue
                assert answer.status_code == 503, (path, answer.status_code)
                assert _code(answer.get_json()) == "rebuilding", path
                assert int(answer.headers["Retry-After"]) >= 1, path
            finally:
                answer.close()
        assert 503 in statuses, f"nobody may ask {path}"
        documented = json.dumps(operation["responses"].get("503", {}))
        assert '"rebuilding"' in documented, f"{path} does not declare 503 rebuilding"

    # The same routes answer once the records are rebuilt.
    start_background(rebuilding_app)
    try:
        await_complete_state(rebuilding_app)
        listed = client.get(f"/spawner/v1/labs/{user.username}/clusters", headers=user.headers)
        assert listed.status_code == 200 and listed.get_json() == []
        missing = client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
        assert missing.status_code == 404
    finally:
        stop_background(rebuilding_app)

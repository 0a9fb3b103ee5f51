"""Apps on the shared emulated cluster: a configuration with two templates and group quotas,
users in groups of their own, the calls the tests make, and a namespace sweep after each."""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from devstack.gafaelfawr import GafaelfawrEmulator, GroupSpec, UserSpec
from tests.clusters.conftest import nothing_left, operators
from tests.labs.conftest import LabUser, admin_headers, lab_raw_config, wait_for

__all__ = ["admin_headers", "lab_raw_config", "nothing_left", "operators"]

APP_IMAGE = "registry.test/apps/dashboard:1.4"
TEMPLATES: list[dict[str, Any]] = [
    {
        "name": "dashboard",
        "version": "1.4",
        "description": "A small dashboard.",
        "podTemplate": {
            "containers": [
                {
                    "name": "dashboard",
                    "image": APP_IMAGE,
                    "ports": [{"name": "http", "containerPort": 8080}],
                }
            ]
        },
        "servicePorts": [{"name": "http", "port": 8080, "targetPort": "http"}],
        "httpPort": 8080,
        "defaultEnvs": [
            {"name": "TITLE", "description": "Shown on every page", "optional": False},
            {"name": "GREETING", "defaultValue": "hello", "optional": True},
        ],
    },
    {
        "name": "notes",
        "version": "2",
        "podTemplate": {"containers": [{"name": "notes", "image": "registry.test/apps/notes:2"}]},
        "servicePorts": [{"name": "http", "port": 80, "targetPort": 3000}],
        "httpPort": 80,
    },
]
QUOTAS = {
    "default": {"cpu": 2, "memory": "8Gi"},
    "groups": [],
}
_groups = itertools.count(1)
_members = itertools.count(1)


@pytest.fixture
def apps_config(operators: None, lab_raw_config: dict[str, Any]) -> dict[str, Any]:
    raw = copy.deepcopy(lab_raw_config)
    raw["clusters"] = {
        "tiers": [{"name": "gpu", "cores": 1, "memory": "2Gi", "gpus": 1, "nodePool": "gpu"}]
    }
    raw["apps"] = {
        "templates": TEMPLATES,
        "baseUrl": "https://data.test",
        "platformScopes": ["exec:notebook", "read:image"],
        "quotas": QUOTAS,
    }
    return raw


@pytest.fixture
def client(apps_config: dict[str, Any], make_app: Callable[[Config], Flask]) -> FlaskClient:
    return make_app(parse_config(apps_config)).test_client()


@pytest.fixture
def new_group() -> Callable[[], str]:
    """A group name nobody else's test uses."""
    return lambda: f"g-apps{next(_groups)}-{int(time.time() * 1000) % 100000}"


@pytest.fixture
def member(gafaelfawr: GafaelfawrEmulator) -> Callable[[str], LabUser]:
    """A user in ``group`` (and a group of their own)."""

    def make(group: str) -> LabUser:
        n = next(_members)
        username = f"{group[:20]}-m{n}"
        uid = 40000 + n
        spec = UserSpec(
            username=username,
            uid=uid,
            gid=uid,
            groups=(GroupSpec(username, uid), GroupSpec(group, 5000)),
        )
        gafaelfawr.add_user(spec)
        token = gafaelfawr.issue_token(username, ["exec:notebook"], token_type="notebook")
        return LabUser(username, token, uid, uid)

    return make


def create(client: FlaskClient, user: LabUser, group: str, **body: Any) -> Any:
    payload = {
        "template": "dashboard",
        "group": group,
        "name": "Our dashboard",
        "size": "small",
        "env": {"TITLE": "Results"},
        **body,
    }
    return client.post("/spawner/v1/apps", json=payload, headers=user.headers)


def app_of(client: FlaskClient, user: LabUser, app_id: str) -> dict[str, Any]:
    response = client.get(f"/spawner/v1/apps/{app_id}", headers=user.headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    body: dict[str, Any] = response.get_json()
    return body


def in_phase(
    client: FlaskClient, user: LabUser, app_id: str, phase: str, timeout: float = 30
) -> dict[str, Any]:
    """The app once it is in ``phase``, the phases it was seen in on the way."""
    seen: list[str] = []

    def look() -> dict[str, Any] | None:
        body = app_of(client, user, app_id)
        if not seen or seen[-1] != body["phase"]:
            seen.append(body["phase"])
        if body["phase"] == "Error" and phase != "Error":
            raise AssertionError(f"the app failed: {body['message']}")
        return body if body["phase"] == phase else None

    result: dict[str, Any] = wait_for(look, timeout=timeout, interval=0.02)
    result["seen"] = seen
    return result

"""Kernels run beside labs: the cluster tests' fixtures (the lab's configuration with tiers and
budgets, a namespace sweep after each test; no Dask operator, which kernels never use), a
kernel budget of two, and the calls the tests make."""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from tests.clusters.conftest import nothing_left, operators, tiers_config, with_lab
from tests.labs.conftest import (
    LabUser,
    admin_headers,
    fresh_image,
    lab_raw_config,
    new_user,
    wait_for,
)

__all__ = [
    "admin_headers",
    "fresh_image",
    "lab_raw_config",
    "new_user",
    "nothing_left",
    "operators",
    "tiers_config",
    "with_lab",
]

KERNEL_BUDGETS = {
    "default": {"clusters": 1, "workers": 3, "kernels": 2, "cpu": 8, "memory": "32Gi"},
}


@pytest.fixture
def kernel_config(tiers_config: dict[str, Any]) -> dict[str, Any]:
    raw = copy.deepcopy(tiers_config)
    raw["budgets"] = KERNEL_BUDGETS
    return raw


@pytest.fixture
def client(kernel_config: dict[str, Any], make_app: Callable[[Config], Flask]) -> FlaskClient:
    return make_app(parse_config(kernel_config)).test_client()


def new_key() -> str:
    return secrets.token_hex(32)


def start(client: FlaskClient, user: LabUser, *, key: str | None = None, **body: Any) -> Any:
    """POST a kernel for ``user`` (size small unless given)."""
    payload = {"size": "small", "connection": {"key": key or new_key()}, **body}
    return client.post(
        f"/spawner/v1/labs/{user.username}/kernels", json=payload, headers=user.headers
    )


def kernel_url(user: LabUser, kernel_id: str) -> str:
    return f"/spawner/v1/labs/{user.username}/kernels/{kernel_id}"


def settled(client: FlaskClient, user: LabUser, kernel_id: str) -> dict[str, Any]:
    """The kernel once it is no longer starting."""

    def look() -> dict[str, Any] | None:
        response = client.get(kernel_url(user, kernel_id), headers=user.headers)
        assert response.status_code == 200, response.get_data(as_text=True)
        body: dict[str, Any] = response.get_json()
        return None if body["status"] == "starting" else body

    result: dict[str, Any] = wait_for(look)
    return result

"""One local stack (gunicorn, emulators, Redis) for the client, notebook and JupyterHub tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from labspawner import LabSpawnerClient, NotFoundError

from devstack.stack import LocalStack, StackOptions
from tests.support.notebooks import python3_kernel
from tests.support.proxy import FaultProxy

__all__ = ["python3_kernel"]


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """The local stack these tests drive, stopped once the last of them has run: kept for
    the whole session, its service, runner, Dask operator and labs went on running beside
    every later test."""
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("client-stack"), workers=2, pull_seconds=0.2
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()


@pytest.fixture(scope="package")
def stack_tokens(stack: LocalStack) -> dict[str, str]:
    """Token values by demo name (admin, rachel, wile...)."""
    return {name: entry["token"] for name, entry in stack.state()["tokens"].items()}


@pytest.fixture
def lab_options(stack: LocalStack) -> dict[str, str]:
    return {"image": stack.demo_image, "size": "small"}


@pytest.fixture
def admin(stack: LocalStack, stack_tokens: dict[str, str]) -> Iterator[LabSpawnerClient]:
    """The service as an administrator (JupyterHub's token)."""
    client = LabSpawnerClient(stack.spawner_url, stack_tokens["admin"])
    yield client
    client.close()


@pytest.fixture
def proxy(stack: LocalStack) -> Iterator[FaultProxy]:
    """A misbehaving-on-request proxy in front of the service."""
    address = urlparse(stack.spawner_url)
    proxy = FaultProxy((address.hostname or "127.0.0.1", address.port or 80))
    yield proxy
    proxy.close()


def delete_lab(admin: LabSpawnerClient, username: str) -> None:
    """Delete ``username``'s lab and wait until it is gone, if there is one."""
    with contextlib.suppress(NotFoundError):
        admin.delete(username, wait=True, timeout=30)

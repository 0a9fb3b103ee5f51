"""One local stack (gunicorn, emulators, Redis) for the client, notebook and JupyterHub tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.stack import LocalStack, StackOptions


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("client-stack"), workers=2, pull_seconds=0.2
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()


@pytest.fixture(scope="session")
def stack_tokens(stack: LocalStack) -> dict[str, str]:
    """Token values by demo name (admin, rachel, wile...)."""
    return {name: entry["token"] for name, entry in stack.state()["tokens"].items()}


@pytest.fixture
def lab_options(stack: LocalStack) -> dict[str, str]:
    return {"image": stack.demo_image, "size": "small"}

"""What the tests of ``make run``'s real labs share: a spawn as a user would make it,
and a user's running lab for the length of a test."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import requests

from devstack.stack import LocalStack
from tests.labs.conftest import wait_for

RECOMMENDED_SMALL = {"options": {"image_class": "recommended", "size": "small"}, "env": {}}


def spawn_recommended(spawner_url: str, token: str, username: str) -> None:
    """Spawn ``username``'s lab with the recommended image through the service, with the
    user's own token, as the README's first call does."""
    response = requests.post(
        f"{spawner_url}/spawner/v1/labs/{username}/spawn",
        headers={"Authorization": f"Bearer {token}"},
        json=RECOMMENDED_SMALL,
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 303, response.text


@contextlib.contextmanager
def running_lab(stack: LocalStack, tokens: dict[str, str], user: str) -> Iterator[None]:
    """``user``'s lab, running (a kernel needs one); it goes after, with the user's kernels."""
    lab = f"{stack.spawner_url}/spawner/v1/labs/{user}"
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    spawn_recommended(stack.spawner_url, tokens[user], user)

    def running() -> bool:
        status = requests.get(lab, headers=admin, timeout=10).json()
        assert status["status"] in ("starting", "running"), status
        return bool(status["status"] == "running")

    wait_for(running, timeout=90)
    try:
        yield
    finally:
        requests.delete(lab, headers=admin, timeout=10)
        wait_for(
            lambda: stack.kube.store.get("namespaces", None, f"nublado-{user}") is None,
            timeout=60,
        )

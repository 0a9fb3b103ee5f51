"""What the image tests on a local stack share: an administrator's reads of the service."""

from __future__ import annotations

from typing import Any

import requests

from devstack.stack import LocalStack


def admin_get(local: LocalStack, path: str) -> Any:
    """The answer to an administrator's GET of ``/spawner/v1<path>``; None while the service
    answers 503 (rebuilding its state)."""
    token = local.state()["tokens"]["admin"]["token"]
    response = requests.get(
        f"{local.spawner_url}/spawner/v1{path}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    if response.status_code == 503:
        return None
    assert response.status_code == 200, response.text
    return response.json()

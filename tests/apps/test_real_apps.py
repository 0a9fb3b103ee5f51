"""An app that really runs, reached through the local stack's ingress as a browser would.

On the stack ``make run`` starts, the demo template's image is a real small web server. The
app is made with the Python client, with a group member's own token; who reaches its pages
through the ingress proxy is decided by the Gafaelfawr emulator from the GafaelfawrIngress the
service made, exactly as the app's scope says, and changes when the scope does. Its variables
reach its process, its log is the process's own output, and stopping it stops the process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from labspawner import LabSpawnerClient

from devstack.stack import LocalStack
from tests.labs.conftest import wait_for

GROUP = "lsst-data"
"""rachel's group, and admin-user's; wile is not in it."""


@pytest.fixture
def rachel(real_lab_stack: LocalStack, real_tokens: dict[str, str]) -> Iterator[LabSpawnerClient]:
    client = LabSpawnerClient(real_lab_stack.spawner_url, real_tokens["rachel"])
    yield client
    for app in client.apps.of(GROUP):
        client.apps.delete(app.id, wait=True)
    client.close()


def fetch(stack: LocalStack, path: str, token: str | None) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(
        f"{stack.state()['ingress_url']}{path}",
        headers=headers,
        allow_redirects=False,
        timeout=30,
    )


def page(stack: LocalStack, path: str, token: str | None) -> dict[str, Any]:
    response = fetch(stack, path, token)
    assert response.status_code == 200, (response.status_code, response.text[:300])
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.slow
def test_an_app_serves_its_pages_to_whom_its_scope_admits(
    real_lab_stack: LocalStack, real_tokens: dict[str, str], rachel: LabSpawnerClient
) -> None:
    stack = real_lab_stack
    wile = real_tokens["wile"]
    app = rachel.apps.create("demo-app", GROUP, "Our page", size="small", scope="group")
    assert app.ready and app.url.endswith(f"/apps/{app.id}/")
    path = f"/apps/{app.id}/"

    shown = page(stack, path, real_tokens["rachel"])
    assert shown["user"] == "rachel"
    assert shown["env"]["APP_ID"] == app.id
    assert shown["env"]["GROUP"] == GROUP
    assert shown["env"]["APP_BASE_URL"] == path
    assert shown["env"]["GREETING"] == "hello"
    # Outside the group: refused; without a token: sent to log in.
    assert fetch(stack, path, wile).status_code == 403
    assert fetch(stack, path, None).status_code == 302
    # A forged identity does not get through the ingress.
    forged = requests.get(
        f"{stack.state()['ingress_url']}{path}",
        headers={"X-Auth-Request-User": "rachel"},
        allow_redirects=False,
        timeout=30,
    )
    assert forged.status_code == 302

    # Anyone logged in, then anyone at all.
    rachel.apps.update(app.id, scope="platform")
    assert page(stack, path, wile)["user"] == "wile"
    assert fetch(stack, path, None).status_code == 302
    updated = rachel.apps.update(app.id, scope="public", env={"GREETING": "good evening"})
    assert updated.env == {"GREETING": "good evening"}
    anonymous = page(stack, path, None)
    assert anonymous["env"]["GREETING"] == "good evening"

    # The log is the process's own, read through the Kubernetes API.
    logs = wait_for(
        lambda: [line for line in rachel.apps.logs(app.id, tail=50) if path in line] or None
    )
    assert any("200" in line for line in logs)

    stopped = rachel.apps.stop(app.id)
    assert stopped.phase == "Stopped"
    assert not [
        p
        for p in stack.kube.store.list("pods", f"nublado-apps-{GROUP}")
        if p["metadata"]["labels"].get("lab-spawner.jupyter.org/app") == app.id
    ]
    assert fetch(stack, path, None).status_code == 503
    assert rachel.apps.start(app.id).ready
    assert page(stack, path, None)["env"]["APP_ID"] == app.id
    rachel.apps.delete(app.id, wait=True)
    assert fetch(stack, path, None).status_code == 404

"""End to end: a real JupyterHub, with configurable-http-proxy, spawning labs through the service.

JupyterHub (pip) runs ``hub/jupyterhub_config.py``, the configuration the docs show, with
``LabSpawner`` and ``GafaelfawrTokenAuthenticator``; its proxy is the npm configurable-http-proxy
that ``make setup`` installs. The test acts as a user would: logs in with a Gafaelfawr token,
opens the spawn page, then drives JupyterHub's REST API with a JupyterHub token of the user's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import requests
from labspawner import LabSpawnerClient, NotFoundError, ServiceUnavailableError

from devstack.stack import LocalStack
from tests.clients.conftest import delete_lab
from tests.labs.conftest import wait_for
from tests.support.hub import Hub, make_hub
from tests.support.images import unpulled_image

USER = "rachel"


@pytest.fixture(scope="module")
def hub(
    stack: LocalStack, stack_tokens: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Hub]:
    hub = make_hub(
        stack,
        stack_tokens["admin"],
        tmp_path_factory.mktemp("jupyterhub"),
        # Answer a start at once (202) instead of waiting up to 10 s for the spawn, so the
        # progress stream is read while the spawn runs.
        "c.JupyterHub.tornado_settings = {'slow_spawn_timeout': 0}\n"
        # Poll each running server every second, so a lab deleted behind the hub's back is
        # noticed within the test.
        "c.Spawner.poll_interval = 1\n"
        # Ignored: the service decides resources and what runs.
        "c.Spawner.mem_limit = '1G'\n"
        "c.Spawner.cpu_limit = 0.5\n"
        "c.Spawner.cmd = ['/bin/false']\n"
        # JupyterHub 4's default, which forwards the hub's own PATH and the like: the
        # spawner sends get_env() unchanged, and the service screens it.
        "c.Spawner.env_keep = ['PATH', 'PYTHONPATH', 'CONDA_ROOT', 'CONDA_DEFAULT_ENV',"
        " 'VIRTUAL_ENV', 'LANG', 'LC_ALL', 'JUPYTERHUB_SINGLEUSER_APP']\n",
    )
    hub.start()
    yield hub
    hub.stop()


@pytest.fixture(scope="module")
def user_session(hub: Hub, stack_tokens: dict[str, str]) -> requests.Session:
    """Rachel logged in through JupyterHub's login form, with her Gafaelfawr token."""
    session = requests.Session()
    page = session.get(f"{hub.url}/hub/login", timeout=10)
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
    assert xsrf is not None, page.text[:500]
    response = session.post(
        f"{hub.url}/hub/login",
        data={"username": USER, "password": stack_tokens[USER], "_xsrf": xsrf.group(1)},
        allow_redirects=False,
        timeout=30,
    )
    assert response.status_code == 302, response.text[:500]
    return session


@pytest.fixture(scope="module")
def user_api(hub: Hub, user_session: requests.Session) -> requests.Session:
    """JupyterHub's REST API as Rachel, with a JupyterHub token of hers."""
    response = hub.api(hub.service_token).post(
        f"{hub.url}/hub/api/users/{USER}/tokens", json={"note": "e2e"}, timeout=10
    )
    assert response.status_code == 201, response.text
    return hub.api(response.json()["token"])


@pytest.fixture(autouse=True)
def _no_lab_left(admin: LabSpawnerClient) -> Iterator[None]:
    yield
    delete_lab(admin, USER)


def _start(hub: Hub, api: requests.Session, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Start Rachel's server over JupyterHub's REST API; its whole progress stream."""
    response = api.post(f"{hub.url}/hub/api/users/{USER}/server", json=options, timeout=30)
    assert response.status_code in (201, 202), response.text
    return _progress(hub, api)


def _progress(hub: Hub, api: requests.Session) -> list[dict[str, Any]]:
    """JupyterHub's progress stream of Rachel's server, to its end (JupyterHub closes it after
    its own final event: ready, or the spawn's failure)."""
    events = []
    with api.get(f"{hub.url}/hub/api/users/{USER}/server/progress", stream=True, timeout=120) as r:
        assert r.status_code == 200, r.text
        for line in r.iter_lines(decode_unicode=True):
            if not line or not line.startswith("data:"):
                continue
            event = json.loads(line[len("data:") :])
            events.append(event)
    return events


def _ready_server(hub: Hub) -> dict[str, Any] | None:
    """Rachel's default server once JupyterHub says it is ready."""
    server: dict[str, Any] | None = hub.user_model(USER)["servers"].get("")
    return server if server and server.get("ready") else None


def _server_gone(hub: Hub) -> bool:
    return not hub.user_model(USER)["servers"]


def test_spawn_page_shows_the_services_form(hub: Hub, user_session: requests.Session) -> None:
    page = user_session.get(f"{hub.url}/hub/spawn", timeout=30)
    assert page.status_code == 200
    # The form is the service's, fetched with Rachel's own token.
    assert 'name="size"' in page.text
    assert 'name="image_list"' in page.text or 'name="image_dropdown"' in page.text


def test_start_progress_ready_at_internal_url_stop_and_clean(
    stack: LocalStack, hub: Hub, user_api: requests.Session, admin: LabSpawnerClient
) -> None:
    options = {"image": [stack.demo_image], "size": ["small"]}  # as JupyterHub's form posts
    events = _start(hub, user_api, options)
    percents = [e["progress"] for e in events if "progress" in e]
    assert percents == sorted(percents)
    assert events[-1]["progress"] == 100 and events[-1]["ready"] is True
    messages = [e.get("message", "") for e in events]
    assert len(events) > 3, messages  # the service's own steps, not only JupyterHub's

    # JupyterHub reports the server ready, at the URL the service gave.
    lab = admin.lab_status(USER)
    assert lab.status == "running" and lab.internal_url == stack.state()["lab_url"]
    # The spawn carried JupyterHub's environment as get_env() makes it; the service kept
    # it, but for its limits (replaced by the lab's), the hub's PATH (dropped) and its API
    # token (in the lab's Secret), and said so in the events JupyterHub showed.
    assert lab.env["JUPYTERHUB_USER"] == USER
    assert "JUPYTERHUB_API_TOKEN" not in lab.env
    assert "MEM_LIMIT" not in lab.env and "CPU_LIMIT" not in lab.env
    assert "PATH" not in lab.env
    assert lab.quotas["limits"]["memory"] != 1024**3
    notice = next(m for m in messages if "From the request's environment" in m)
    assert "the platform sets CPU_LIMIT, MEM_LIMIT" in notice
    assert "not passed to the lab: PATH" in notice
    server = wait_for(lambda: _ready_server(hub))
    assert server["state"]["internal_url"] == lab.internal_url
    assert server["user_options"]["size"] == ["small"]
    routes = requests.get(
        f"{hub.proxy_api}/api/routes",
        headers={"Authorization": f"token {hub.proxy_token}"},
        timeout=10,
    ).json()
    assert routes[f"/user/{USER}"]["target"] == lab.internal_url
    # Through the public proxy to the lab (the local stack's stand-in for its server).
    through_proxy = requests.get(f"{hub.url}/user/{USER}/api", timeout=10)
    assert through_proxy.status_code == 200 and "version" in through_proxy.json()

    response = user_api.delete(f"{hub.url}/hub/api/users/{USER}/server", timeout=60)
    assert response.status_code in (202, 204), response.text
    wait_for(lambda: _server_gone(hub), timeout=60)
    with pytest.raises(NotFoundError):
        admin.lab_status(USER)
    namespaces = [ns["metadata"]["name"] for ns in stack.kube.store.list("namespaces")]
    assert not [ns for ns in namespaces if ns.endswith(f"-{USER}")]
    assert not [p for p in stack.kube.store.list("pods") if USER in p["metadata"]["namespace"]]
    assert (
        f"/user/{USER}"
        not in requests.get(
            f"{hub.proxy_api}/api/routes",
            headers={"Authorization": f"token {hub.proxy_token}"},
            timeout=10,
        ).json()
    )


def test_a_failed_spawn_shows_the_reason_in_jupyterhubs_progress(
    stack: LocalStack, hub: Hub, user_api: requests.Session, admin: LabSpawnerClient
) -> None:
    image = unpulled_image(stack, admin)
    stack.kube.cluster.faults.set("image_pull", f"{image}*", "manifest unknown")
    try:
        options = {"image": image, "size": "small"}
        events = _start(hub, user_api, options)
    finally:
        stack.kube.cluster.faults.clear()
    final = events[-1]
    assert final.get("failed") is True and final["progress"] == 100
    assert final["message"].startswith("Spawn failed: cannot pull image")
    assert "pull" in final["message"].lower()
    # The spawner's own event came first, with the service's reason.
    assert any(e.get("message", "").startswith("Lab failed: cannot pull image") for e in events)
    wait_for(lambda: _server_gone(hub), timeout=60)


def test_start_reattaches_to_a_lab_that_already_runs(
    stack: LocalStack,
    hub: Hub,
    user_api: requests.Session,
    stack_tokens: dict[str, str],
    admin: LabSpawnerClient,
) -> None:
    # The lab exists before JupyterHub asks for it (as after a hub restart mid-spawn).
    rachel = LabSpawnerClient(stack.spawner_url, stack_tokens[USER])
    lab = rachel.spawn(
        USER, {"image": stack.demo_image, "size": "small"}, wait=True, progress=False
    )
    assert lab is not None and lab.running
    events = _start(hub, user_api, {"image": stack.demo_image, "size": "small"})
    assert events[-1].get("ready") is True, events
    server = wait_for(lambda: _ready_server(hub))
    assert server["state"]["internal_url"] == lab.internal_url
    # The same lab: no second spawn happened.
    assert admin.lab_status(USER) == lab
    assert user_api.delete(f"{hub.url}/hub/api/users/{USER}/server", timeout=60).ok
    wait_for(lambda: _server_gone(hub), timeout=60)


def test_poll_notices_a_lab_deleted_behind_the_hubs_back(
    stack: LocalStack, hub: Hub, user_api: requests.Session, admin: LabSpawnerClient
) -> None:
    assert _server_gone(hub)
    assert _start(hub, user_api, {"image": stack.demo_image, "size": "small"})[-1].get("ready")
    assert admin.lab_status(USER).running
    final = admin.delete(USER, wait=True, timeout=30)
    assert final is not None and final.type == "complete"
    # JupyterHub's poll now answers 0 and the hub forgets the server.
    wait_for(lambda: _server_gone(hub), timeout=30)


def test_a_restarted_hub_keeps_labs_while_the_service_rebuilds(
    stack: LocalStack,
    stack_tokens: dict[str, str],
    hub: Hub,
    user_api: requests.Session,
    admin: LabSpawnerClient,
) -> None:
    """Redis comes back empty and JupyterHub restarts before the service has rebuilt its
    state: the hub's start-up poll gets 503 ``rebuilding``, which is "unknown", so the hub
    keeps Rachel's server (a poll saying "stopped" would make it stop, and delete, the lab)."""
    assert _server_gone(hub)
    assert _start(hub, user_api, {"image": stack.demo_image, "size": "small"})[-1].get("ready")
    before = admin.lab_status(USER)
    assert before.running
    admin_token = stack_tokens["admin"]
    hub.stop()
    # A slow list of lab pods (a big cluster) holds the rebuild open past the hub's start.
    stack.kube.faults.add_latency(10.0, verb="list", resource="pods")
    try:
        redis.Redis.from_url(stack.redis_url).flushall()
        with (
            LabSpawnerClient(stack.spawner_url, admin_token, retries=0) as once,
            pytest.raises(ServiceUnavailableError) as rebuilding,
        ):
            once.lab_status(USER)
        assert rebuilding.value.code == "rebuilding"
        hub.start()
        # The hub polled the server while the service rebuilt, and kept it.
        log = hub.log.read_text()
        assert f"{USER} still running" in log
        assert f"Lab of {USER}: state unknown" in log
    finally:
        stack.kube.faults.clear()
    assert hub.user_model(USER)["servers"][""]["ready"]
    wait_for(lambda: _status_or_none(admin) is not None, timeout=60)
    # The same lab, rebuilt from Kubernetes: never deleted, never spawned again.
    assert admin.lab_status(USER) == before
    assert user_api.delete(f"{hub.url}/hub/api/users/{USER}/server", timeout=60).ok
    wait_for(lambda: _server_gone(hub), timeout=60)


def _status_or_none(admin: LabSpawnerClient) -> Any:
    try:
        return admin.lab_status(USER)
    except ServiceUnavailableError:
        return None


def test_start_replaces_a_lab_that_failed(
    stack: LocalStack,
    hub: Hub,
    user_api: requests.Session,
    stack_tokens: dict[str, str],
    admin: LabSpawnerClient,
) -> None:
    image = unpulled_image(stack, admin)
    rachel = LabSpawnerClient(stack.spawner_url, stack_tokens[USER])
    stack.kube.cluster.faults.set("image_pull", f"{image}*", "manifest unknown")
    try:
        failed = rachel.spawn(USER, {"image": image, "size": "small"}, wait=True, progress=False)
    finally:
        stack.kube.cluster.faults.clear()
    assert failed is not None and failed.failed
    assert _server_gone(hub)
    assert _start(hub, user_api, {"image": stack.demo_image, "size": "small"})[-1].get("ready")
    lab = admin.lab_status(USER)
    assert lab.running and lab.options["image"].startswith(stack.demo_image)
    assert user_api.delete(f"{hub.url}/hub/api/users/{USER}/server", timeout=60).ok
    wait_for(lambda: _server_gone(hub), timeout=60)


def test_login_refuses_a_bad_token_or_another_users_name(
    hub: Hub, stack_tokens: dict[str, str]
) -> None:
    for username, password in ((USER, "gt-not.a-token"), ("wile", stack_tokens[USER])):
        session = requests.Session()
        page = session.get(f"{hub.url}/hub/login", timeout=10)
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
        assert xsrf is not None
        response = session.post(
            f"{hub.url}/hub/login",
            data={"username": username, "password": password, "_xsrf": xsrf.group(1)},
            allow_redirects=False,
            timeout=30,
        )
        assert response.status_code == 403, (username, response.status_code)
        assert "jupyterhub-hub-login" not in response.cookies  # no session was opened


def test_the_spawn_form_posted_as_a_browser_does(
    stack: LocalStack, hub: Hub, user_session: requests.Session, admin: LabSpawnerClient
) -> None:
    page = user_session.get(f"{hub.url}/hub/spawn", timeout=30)
    action = re.search(r'<form[^>]*action="([^"]+)"', page.text)
    assert action is not None
    # Multipart form fields, as JupyterHub's spawn page submits them; options_from_form turns
    # them into the service's options.
    fields = {
        "image_list": (None, "use_image_from_dropdown"),
        "image_dropdown": (None, stack.demo_image),
        "size": (None, "small"),
        "debug": (None, "true"),
    }
    response = user_session.post(f"{hub.url}{action.group(1)}", files=fields, timeout=60)
    assert response.status_code == 200
    wait_for(lambda: _ready_server(hub), timeout=60)
    lab = admin.lab_status(USER)
    assert lab.running
    assert lab.options["debug"] is True and lab.options["size"] == "small"
    assert lab.options["image"].startswith(stack.demo_image)
    assert user_session.get(f"{hub.url}/user/{USER}/api", timeout=10).json()["version"]
    hub.api(hub.service_token).delete(f"{hub.url}/hub/api/users/{USER}/server", timeout=60)
    wait_for(lambda: _server_gone(hub), timeout=60)

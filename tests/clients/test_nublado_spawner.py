"""nublado's JupyterHub spawner's protocol, end to end on the local stack.

Platforms that run nublado's hub spawner (``NubladoSpawner``, once ``RSPRestSpawner``) switch
to this service unchanged. The calls below are the ones that spawner makes, with the same
libraries (httpx, and httpx-sse for the event stream), headers and bodies, and the events are
read by its rules: every ``data`` is JSON with a ``message`` and perhaps a ``progress`` from 1
to 100 (it would show anything else as a bare message, and fail on a ``progress`` event), the
stream ends at ``complete`` or ``failed``, a create answered 409 is followed by a stop and a
second create, and a stop (``DELETE``, up to 300 s) must return once the lab is gone. The
environment is JupyterHub's base ``Spawner.get_env()`` with nublado's empty ``env_keep``. The
labs are the stack's stand-in servers: a real single-user server would call a JupyterHub that
this test does not run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace

import httpx
import pytest
from httpx_sse import ServerSentEvent, connect_sse
from jupyterhub.objects import Hub as HubObject
from jupyterhub.spawner import Spawner

from devstack.stack import LocalStack

USER = "rachel"
START_TIMEOUT = 120.0
STOP_TIMEOUT = 300.0
"""What nublado's spawner waits for a stop."""


@dataclass
class NubladoCalls:
    """The requests nublado's spawner makes, and what it makes of the answers."""

    base_url: str
    user_token: str
    hub_token: str
    client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=60))
    messages: list[str] = field(default_factory=list)
    """What JupyterHub's progress page would show, in order."""
    bar: list[int] = field(default_factory=list)
    """Where the progress bar stood at each event."""
    answers: list[int] = field(default_factory=list)
    """Every status code, in order."""

    def _url(self, *parts: str) -> str:
        return f"{self.base_url}/spawner/v1/" + "/".join(parts)

    def _user(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.user_token}"}

    def _hub(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.hub_token}"}

    def _note(self, response: httpx.Response) -> httpx.Response:
        self.answers.append(response.status_code)
        return response

    def options_form(self) -> str:
        response = self._note(self.client.get(self._url("lab-form", USER), headers=self._user()))
        response.raise_for_status()
        return response.text

    def poll(self) -> int | None:
        response = self._note(self.client.get(self._url("labs", USER), headers=self._hub()))
        if response.status_code == 404:
            return 0
        response.raise_for_status()
        status = response.json()["status"]
        if status == "failed":
            return 1
        return 0 if status in ("terminating", "terminated") else None

    def start(self, options: dict[str, list[str]], env: dict[str, str]) -> str:
        """A create; on 409 a stop and a second create; the events until ``complete``; the
        lab's ``internal_url``."""
        response = self._create(options, env)
        if response.status_code == 409:
            self.messages.append("[warning] Deleting existing orphaned lab")
            self.stop()
            response = self._create(options, env)
        response.raise_for_status()
        progress = 0
        with connect_sse(
            self.client,
            "GET",
            self._url("labs", USER, "events"),
            headers=self._user(),
            timeout=START_TIMEOUT,
        ) as source:
            for sse in source.iter_sse():
                if sse.event == "ping":
                    continue
                message, progress = _read_event(sse, progress)
                self.bar.append(progress)
                self.messages.append(f"[{sse.event}] {message}")
                if sse.event == "complete":
                    break
                assert sse.event != "failed", message
        status = self._note(self.client.get(self._url("labs", USER), headers=self._hub()))
        status.raise_for_status()
        url = status.json().get("internal_url")
        assert url, status.json()
        return str(url)

    def _create(self, options: dict[str, list[str]], env: dict[str, str]) -> httpx.Response:
        return self._note(
            self.client.post(
                self._url("labs", USER, "create"),
                headers=self._user(),
                json={"options": options, "env": env},
                timeout=START_TIMEOUT,
            )
        )

    def stop(self) -> None:
        response = self._note(
            self.client.delete(self._url("labs", USER), headers=self._hub(), timeout=STOP_TIMEOUT)
        )
        if response.status_code != 404:
            response.raise_for_status()


def _read_event(sse: ServerSentEvent, progress: int) -> tuple[str, int]:
    """The message and the bar's position, as nublado's spawner reads an event: it takes
    JSON ``{"message", "progress"}`` and nothing else (asserted here: anything else it would
    show raw, or fail on)."""
    try:
        data = sse.json()
    except ValueError:
        raise AssertionError(f"not JSON: {sse}") from None
    assert set(data) <= {"message", "progress"} and "message" in data, sse
    if "progress" in data:
        progress = int(data["progress"])
        assert 0 <= progress <= 100, sse
    assert sse.event in ("info", "error", "complete", "failed"), sse
    return str(data["message"]), progress


def _hub_env(api_token: str) -> dict[str, str]:
    """What JupyterHub's base ``Spawner.get_env()`` gives nublado's spawner, which keeps no
    variable of the hub's own (``env_keep`` empty) and ignores ``mem_limit``, here set."""
    user = SimpleNamespace(name=USER, url=f"/user/{USER}/", escaped_name=USER)
    spawner = Spawner(
        user=user,
        hub=HubObject(ip="127.0.0.1", port=8081, base_url="/nb/hub/"),
        api_token=api_token,
        oauth_client_id=f"jupyterhub-user-{USER}",
        env_keep=[],
        mem_limit="2G",
        cpu_limit=1.5,
    )
    env: dict[str, str] = spawner.get_env()
    env["JUPYTERHUB_SERVICE_PREFIX"] = f"/nb/user/{USER}/"
    return env


def _form_choices(html: str) -> dict[str, list[str]]:
    """The form as JupyterHub posts it when the user takes the preselected image and the
    first size and ticks the debug switch: each field a list of one string."""
    image = re.search(r'<input type="radio" name="image_list"[^>]* value="([^"]+)"', html)
    size = re.search(r'<select name="size"[^>]*>\s*<option value="([^"]+)"', html)
    assert image and size, html
    assert 'name="enable_debug"' in html
    return {"image_list": [image.group(1)], "size": [size.group(1)], "enable_debug": ["true"]}


@pytest.fixture
def nublado(stack: LocalStack, stack_tokens: dict[str, str]) -> Iterator[NubladoCalls]:
    calls = NubladoCalls(stack.spawner_url, stack_tokens[USER], stack_tokens["admin"])
    yield calls
    calls.stop()
    calls.client.close()


def test_nublados_spawner_starts_polls_recovers_and_stops_a_lab(
    nublado: NubladoCalls, stack: LocalStack
) -> None:
    env = _hub_env("hub-api-token-of-the-lab")
    assert {"MEM_LIMIT", "CPU_LIMIT", "JUPYTERHUB_API_TOKEN"} <= set(env)  # JupyterHub's own
    options = _form_choices(nublado.options_form())

    url = nublado.start(options, env)
    assert nublado.answers[:2] == [200, 201]
    assert nublado.poll() is None
    # The bar moved, forward only, and the page said what happened.
    assert len(set(nublado.bar)) >= 4 and nublado.bar == sorted(nublado.bar), nublado.bar
    assert nublado.messages[0] == "[info] Lab creation requested"
    assert any("the platform sets CPU_LIMIT, MEM_LIMIT" in m for m in nublado.messages)
    assert nublado.messages[-1].startswith("[complete] ")
    # The lab answers at its internal URL, with the options and env it was given.
    assert "version" in httpx.get(f"{url}/user/{USER}/api", timeout=10).json()
    lab = httpx.get(f"{nublado.base_url}/spawner/v1/user-status", headers=nublado._user()).json()
    assert (lab["api"], lab["options"]["debug"]) == ("nublado", True)
    assert lab["env"]["JUPYTERHUB_SERVICE_PREFIX"] == f"/nb/user/{USER}/"
    assert "MEM_LIMIT" not in lab["env"] and "JUPYTERHUB_API_TOKEN" not in lab["env"]

    # The hub restarted mid-spawn and starts again: create gets 409, stop waits until the
    # lab is gone (204), the second create starts a new lab.
    nublado.answers.clear()
    nublado.bar.clear()
    url = nublado.start(options, env)
    assert nublado.answers[:3] == [409, 204, 201], nublado.answers
    assert "[warning] Deleting existing orphaned lab" in nublado.messages
    assert "version" in httpx.get(f"{url}/user/{USER}/api", timeout=10).json()

    # Stop answers once the lab is gone: nothing is left when it returns.
    nublado.answers.clear()
    nublado.stop()
    assert nublado.answers == [204]
    assert nublado.poll() == 0
    assert stack.kube.store.get("namespaces", None, f"nublado-{USER}") is None
    nublado.stop()  # a stop with nothing to stop succeeds (404)
    assert nublado.answers[-1] == 404


def test_nublados_spawner_reads_a_refusal_in_its_own_error_body(
    nublado: NubladoCalls,
) -> None:
    response = nublado._create(
        {"image_list": ["127.0.0.1:1/nothing:1"], "size": ["small"]}, _hub_env("t")
    )
    assert response.status_code == 422
    (detail,) = response.json()["detail"]
    assert detail["type"] == "unknown_image"
    assert detail["loc"] == ["body", "options", "image_list"]
    assert nublado.poll() == 0

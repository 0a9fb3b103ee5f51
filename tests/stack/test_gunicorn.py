"""The real gunicorn, two gevent workers, on the local stack, called over HTTP."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from app.models.process_role import ROLE_ENV
from devstack.stack import REPO_ROOT, RUNNER_COMMAND, WEB_COMMAND, LocalStack, StackOptions
from devstack.virtualenvs import dask_operator_python, service_python
from tests.labs.conftest import wait_for
from tests.support.sse import SseEvent, parse_sse


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    state_dir = tmp_path_factory.mktemp("devstack")
    options = StackOptions(
        state_dir=state_dir,
        workers=2,
        pull_seconds=0.2,
        extra_env={"SPAWNER_ACCESS_LOG": str(state_dir / "access.log")},
        log_path=state_dir / "service.log",
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()


def _children(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(entry.name))
    return children


def test_gevent_patches_the_workers_before_anything_imports_ssl(stack: LocalStack) -> None:
    """No worker boots with a network library that took ``ssl`` (or sockets) before gevent
    patched them: such a library would block its whole worker on a TLS call, as a talk to a
    real Kubernetes API server is. gevent says so at boot when it happens."""
    log = (stack.options.state_dir / "service.log").read_text()
    assert "Booting worker" in log
    assert "MonkeyPatchWarning" not in log, log[:3000]


DEV_ONLY = ("pytest", "kubernetes_validate", "jsonschema")
"""Development packages, none of which the images install."""


def _argv0(pid: int | None) -> str:
    assert pid is not None
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()


def _installed(python: str, modules: tuple[str, ...]) -> list[str]:
    code = f"import importlib.util as u; print(*[m for m in {modules!r} if u.find_spec(m)])"
    found = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return found.stdout.split()


def test_the_service_and_the_operator_run_with_their_images_packages(stack: LocalStack) -> None:
    """gunicorn's master, its workers and the runner run in the service's virtualenv, which
    holds ``requirements.txt`` only, as the image does, and the Dask operator in one of its own:
    a development package changes what a program imports (``kubernetes`` imports
    ``kubernetes-validate`` when it is there) and would hide a module an image lacks."""
    replica = stack.replicas[0]
    pids = [replica.pid, *replica.worker_pids(), *replica.runner_pids()]
    assert len(pids) == 4, pids
    assert {_argv0(pid) for pid in pids} == {service_python()}
    assert stack.dask_operator is not None
    assert _argv0(stack.dask_operator.pid) == dask_operator_python() != service_python()
    assert _installed(service_python(), (*DEV_ONLY, "gunicorn")) == ["gunicorn"]
    assert _installed(dask_operator_python(), (*DEV_ONLY, "kopf")) == ["kopf"]


def test_two_workers_serve_health_and_readiness(stack: LocalStack) -> None:
    """The web role's readiness is what it answers from (it never calls Kubernetes); the
    runner's, beside it, adds the Kubernetes API it works against."""
    assert stack.spawner_process is not None
    assert len(_children(stack.spawner_process.pid)) == 2
    assert requests.get(f"{stack.spawner_url}/healthz", timeout=5).json() == {"status": "ok"}
    ready = requests.get(f"{stack.spawner_url}/readyz", timeout=5)
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"redis": "ok", "state": "ok", "images": "ok"}
    runner = requests.get(f"{stack.replicas[0].runner_url}/readyz", timeout=5)
    assert runner.status_code == 200
    assert runner.json()["checks"] == {
        "redis": "ok",
        "kubernetes": "ok",
        "state": "ok",
        "images": "ok",
    }


def test_auth_errors_are_json_over_http(stack: LocalStack) -> None:
    response = requests.get(f"{stack.spawner_url}/spawner/v1/labs", timeout=5)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    rachel = stack.state()["tokens"]["rachel"]["token"]
    response = requests.get(
        f"{stack.spawner_url}/spawner/v1/labs",
        headers={"Authorization": f"Bearer {rachel}"},
        timeout=5,
    )
    assert response.status_code == 403


def test_spawn_and_delete_over_http(stack: LocalStack) -> None:
    state = stack.state()
    user = {"Authorization": f"Bearer {state['tokens']['wile']['token']}"}
    admin = {"Authorization": f"Bearer {state['tokens']['admin']['token']}"}
    image = stack.demo_image
    base = f"{stack.spawner_url}/spawner/v1"
    response = requests.post(
        f"{base}/labs/wile/spawn",
        json={"options": {"image": image, "size": "small"}, "env": {}},
        headers=user,
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 303, response.text
    with requests.get(f"{base}/labs/wile/events", headers=user, stream=True, timeout=30) as events:
        kinds = [e.type for e in parse_sse(events.iter_content(None)) if isinstance(e, SseEvent)]
    assert kinds[-1] == "complete"
    status = requests.get(f"{base}/labs/wile", headers=admin, timeout=5).json()
    assert status["status"] == "running"
    # JupyterHub would now find the lab up at its internal URL: the stack's lab stand-in.
    assert status["internal_url"] == state["lab_url"]
    lab = requests.get(f"{status['internal_url']}/user/wile/api", timeout=5)
    assert lab.status_code == 200 and "version" in lab.json()
    assert requests.delete(f"{base}/labs/wile", headers=admin, timeout=5).status_code == 202
    with requests.get(f"{base}/labs/wile/events", headers=user, stream=True, timeout=30) as events:
        kinds = [e.type for e in parse_sse(events.iter_content(None)) if isinstance(e, SseEvent)]
    assert kinds[-1] == "complete"
    assert requests.get(f"{base}/labs/wile", headers=admin, timeout=5).status_code == 404
    assert requests.get(f"{state['lab_url']}/user/wile/api", timeout=5).status_code == 503


def test_stack_state_file(stack: LocalStack) -> None:
    import json

    state = json.loads((stack.options.state_dir / "stack.json").read_text())
    assert set(state) >= {
        "spawner_url",
        "kubernetes_url",
        "gafaelfawr_url",
        "registry_url",
        "lab_url",
        "redis_url",
        "tokens",
    }
    config = yaml.safe_load(stack.config_path.read_text())
    assert config["lab"]["internalUrl"] == state["lab_url"]
    assert requests.get(f"{state['lab_url']}/hub/api", timeout=5).status_code == 404
    admins = [t for t in state["tokens"].values() if "admin:notebook" in t["scopes"]]
    users = [t for t in state["tokens"].values() if "exec:notebook" in t["scopes"]]
    assert admins and len(users) >= 2


@pytest.mark.parametrize("command", [WEB_COMMAND, RUNNER_COMMAND], ids=["web", "runner"])
def test_bad_config_stops_each_role_with_the_message(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "config.yaml"
    text = "gafaelfawr: {url: http://g.example}\nprepull: []\nlab: {sizes: []}\n"
    path.write_text(text, encoding="utf-8")
    env = {**os.environ, "SPAWNER_CONFIG_PATH": str(path), "SPAWNER_BIND": "127.0.0.1:0"}
    result = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "prepull: Shorter than minimum length 1." in result.stderr
    assert "lab.sizes: Shorter than minimum length 1." in result.stderr
    assert "Traceback" not in result.stderr


def test_gunicorn_refuses_the_runner_role_and_names_its_command() -> None:
    """The runner is one process of its own; under gunicorn it would be a master for one
    worker, which the chart no longer runs."""
    env = {**os.environ, ROLE_ENV: "runner", "SPAWNER_BIND": "127.0.0.1:0"}
    result = subprocess.run(
        WEB_COMMAND, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "the runner runs as `python runner.py`" in result.stderr


def test_the_elected_refresher_fills_the_form_for_every_worker(stack: LocalStack) -> None:
    tokens = stack.state()["tokens"]
    admin = {"Authorization": f"Bearer {tokens['admin']['token']}"}
    rachel = {"Authorization": f"Bearer {tokens['rachel']['token']}"}
    base = f"{stack.spawner_url}/spawner/v1"

    def refreshed() -> dict[str, object] | None:
        configs = requests.get(f"{base}/images", headers=admin, timeout=5).json()["configs"]
        jupyter = next(c for c in configs if c["name"] == "jupyter")
        return jupyter if jupyter["refreshed"] is not None else None

    jupyter = wait_for(refreshed, timeout=30, interval=0.2)
    recommended = jupyter["recommended"]
    assert isinstance(recommended, dict) and recommended["tag"] == "w_2024_42"
    # Both workers answer from the same Redis list (connections are not kept alive here,
    # so the requests spread over the workers).
    for _ in range(6):
        form = requests.get(f"{base}/spawn-form/rachel", headers=rachel, timeout=5)
        assert form.status_code == 200
        assert recommended["reference"] in form.text
        assert "Recommended (Weekly 2024_42)" in form.text


def test_query_values_never_reach_the_access_log(stack: LocalStack) -> None:
    """A token sent in the query string is refused, and the access log keeps its name only;
    a route's own parameter keeps its value."""
    secret = "gt-not-to-be-logged.in-any-line"
    url = f"{stack.spawner_url}/spawner/v1/labs?token={secret}&page=&grace_seconds=5"
    assert requests.get(url, timeout=5).status_code == 401
    log = stack.options.state_dir / "access.log"
    wait_for(lambda: "token=" in log.read_text())
    text = log.read_text()
    assert secret not in text
    assert '"GET /spawner/v1/labs?token=[redacted]&page=&grace_seconds=5 HTTP/1.1" 401' in text

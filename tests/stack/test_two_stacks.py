"""Two local stacks on one machine, as two checkouts' ``make run`` (or ``make run`` beside
``make test``) are: each claims its own loopback block, and each lab's server and Dask
scheduler are that stack's own. Checked by what each answers: a lab answers with the token its
own log printed (and refuses the other's), and the scheduler a stack's cluster reaches is a
process of that stack, whose log names an address of that stack's block."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from labspawner import LabSpawnerClient

from devstack.redis_process import free_port
from devstack.stack import REPO_ROOT
from tests.labs.conftest import wait_for
from tests.stack.test_no_orphans import _descendants
from tests.support.real_labs import spawn_recommended

USER = "rachel"
_COPIED_AWAY = (".git", ".venv", ".devstack", ".artifacts", "node_modules", "_build", "__pycache__")


@dataclass
class RunningStack:
    process: subprocess.Popen[str]
    state: dict[str, Any]

    def get(self, url: str, **kwargs: Any) -> requests.Response:
        return requests.get(url, timeout=10, **kwargs)

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.state['tokens']['admin']['token']}"}

    @property
    def token(self) -> str:
        return str(self.state["tokens"][USER]["token"])

    def log(self, pod: str) -> str:
        url = f"{self.state['kubernetes_url']}/api/v1/namespaces/nublado-{USER}/pods/{pod}/log"
        return self.get(url).text


def _start(checkout: Path, state_dir: Path) -> RunningStack:
    env = {k: v for k, v in os.environ.items() if k != "SPAWNER_REDIS_URL"}
    env["SPAWNER_PORT"] = str(free_port())
    process = subprocess.Popen(
        [sys.executable, "-m", "devstack", "--state-dir", str(state_dir)],
        cwd=checkout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if "Ctrl-C stops everything" in line:
            break
    else:
        pytest.fail(f"the stack of {checkout} exited at start-up")
    return RunningStack(process, json.loads((state_dir / "stack.json").read_text()))


@pytest.fixture
def two_stacks(tmp_path: Path) -> Iterator[tuple[RunningStack, RunningStack]]:
    """This checkout's stack and a second clone's, running at once."""
    clone = tmp_path / "clone"
    shutil.copytree(REPO_ROOT, clone, ignore=shutil.ignore_patterns(*_COPIED_AWAY))
    stacks: list[RunningStack] = []
    try:
        stacks.append(_start(REPO_ROOT, tmp_path / "first"))
        stacks.append(_start(clone, tmp_path / "second"))
        yield stacks[0], stacks[1]
    finally:
        for stack in stacks:
            stack.process.send_signal(signal.SIGINT)
        for stack in stacks:
            try:
                stack.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                stack.process.kill()
                stack.process.wait()


def _running_lab(stack: RunningStack) -> str:
    """The user's lab on ``stack``, spawned as the README's first call does: its URL."""
    spawn_recommended(stack.state["spawner_url"], stack.token, USER)
    url = f"{stack.state['spawner_url']}/spawner/v1/labs/{USER}"

    def running() -> str | None:
        status = stack.get(url, headers=stack.admin).json()
        assert status["status"] in ("starting", "running"), status
        return status["internal_url"] if status["status"] == "running" else None

    return str(wait_for(running, timeout=120))


def _server_token(stack: RunningStack) -> str:
    """The token the lab's Jupyter server printed in its log."""
    found = wait_for(lambda: re.search(r"token=([0-9a-f]+)", stack.log(f"nb-{USER}-lab")), 60)
    return str(found.group(1))


@pytest.mark.slow
def test_two_stacks_never_answer_for_each_other(
    two_stacks: tuple[RunningStack, RunningStack],
) -> None:
    blocks = [stack.state["addresses"] for stack in two_stacks]
    assert blocks[0] != blocks[1]
    prefixes = [re.match(r"(127\.\d+\.)", b["pods"]).group(1) for b in blocks]  # type: ignore[union-attr]
    assert prefixes[0] != prefixes[1]

    urls = [_running_lab(stack) for stack in two_stacks]
    tokens = [_server_token(stack) for stack in two_stacks]
    for index, (url, token) in enumerate(zip(urls, tokens, strict=True)):
        assert url.startswith(f"http://{prefixes[index]}")
        # The server behind this stack's lab URL is the one whose log this stack serves...
        assert requests.get(f"{url}/api/status", params={"token": token}, timeout=10).ok
        # ...and not the other stack's, whose token it does not know.
        other = tokens[1 - index]
        refused = requests.get(f"{url}/api/status", params={"token": other}, timeout=10)
        assert refused.status_code == 403

    for index, stack in enumerate(two_stacks):
        with LabSpawnerClient(stack.state["spawner_url"], stack.token) as client:
            dask, cluster = client.clusters.dask_client(USER, workers=1, timeout=120)
            try:
                # The scheduler answering is a process of this stack, not the other's.
                pid = dask.run_on_scheduler(os.getpid)
                assert pid in _descendants(stack.process.pid)
                assert pid not in _descendants(two_stacks[1 - index].process.pid)
                assert dask.submit(sum, range(10)).result(timeout=60) == 45
            finally:
                dask.close()
            address = str(cluster.scheduler_address)
            scheduler = next(
                pod["metadata"]["name"]
                for pod in stack.get(
                    f"{stack.state['kubernetes_url']}/api/v1/namespaces/nublado-{USER}/pods"
                ).json()["items"]
                if pod["metadata"]["labels"].get("lab-spawner.jupyter.org/cluster-role") == "head"
            )
            log = stack.log(scheduler)
            assert re.search(rf"Scheduler at:\s+tcp://{re.escape(prefixes[index])}", log), log
            assert address.startswith(f"tcp://{prefixes[index]}")

"""``make run`` leaves no process behind, whether it is interrupted or killed outright: not
Redis, not gunicorn, not the Jupyter server of a lab it runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.kube.cluster.processes import await_exits
from devstack.redis_process import free_port
from devstack.stack import REPO_ROOT
from tests.labs.conftest import wait_for
from tests.support.real_labs import spawn_recommended

GONE_SECONDS = 15.0


def _children() -> dict[int, list[int]]:
    """Every process's children, from ``/proc``."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # The command name (in parentheses) may hold spaces; the parent pid follows it.
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry))
    return tree


def _descendants(pid: int) -> set[int]:
    tree = _children()
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _with_a_lab(pids: set[int]) -> set[int] | None:
    """``pids`` once one of them is a lab's Jupyter server."""
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"jupyter" in command:
            return pids
    return None


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL], ids=["interrupted", "killed"])
def test_the_stack_leaves_no_process_behind(tmp_path: Path, stop: signal.Signals) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SPAWNER_REDIS_URL"}
    stack = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "devstack",
            "--port",
            str(free_port()),
            "--state-dir",
            str(tmp_path),
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert stack.stdout is not None
        # The stack prints its addresses once everything is up, ending with how to stop it.
        for line in stack.stdout:
            if "Ctrl-C stops everything" in line:
                break
        else:
            pytest.fail("the stack exited at start-up")
        state = json.loads((tmp_path / "stack.json").read_text())
        rachel = state["tokens"]["rachel"]["token"]
        spawn_recommended(state["spawner_url"], rachel, "rachel")
        # Redis, gunicorn's arbiter and its worker, and the lab's Jupyter server.
        started = wait_for(lambda: _with_a_lab(_descendants(stack.pid)), timeout=60)
        assert len(started) >= 4
        stack.send_signal(stop)
        stack.wait(timeout=GONE_SECONDS)
        if stop == signal.SIGINT:
            assert stack.returncode == 0
        assert await_exits(started, GONE_SECONDS) == set()
    finally:
        if stack.poll() is None:
            stack.kill()
            stack.wait()

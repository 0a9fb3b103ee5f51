"""The maintenance pod on the local stack as ``make run`` starts it: the admin-user demo token
starts it over HTTP, its image runs as a real process (``devstack/images/fsadmin.py``) that
lists its mounts in the pod's log, and a delete stops that process promptly."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import requests

from devstack.images.fsadmin import describe
from devstack.stack import LocalStack
from tests.conftest import bearer
from tests.labs.conftest import wait_for

URL = "/spawner/v1/admin/pod"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_image_lists_its_mounts_under_the_prefix(tmp_path: Path) -> None:
    home = tmp_path / "volumes" / "home"
    home.mkdir(parents=True)
    env = {
        "MOUNT_PREFIX": "/mnt",
        "ADMIN_MOUNT_HOME": str(home),
        "ADMIN_MOUNT_GONE": str(tmp_path / "volumes" / "gone"),
        "HOME": "/root",
    }
    assert describe(env) == [
        "mount /mnt/gone: missing",
        "mount /mnt/home: writable",
        "fsadmin ready; waiting for SIGTERM",
    ]
    assert list(home.iterdir()) == []  # the probe leaves nothing behind


def test_admin_user_starts_the_real_pod_which_lists_its_mounts_and_stops_on_delete(
    real_lab_stack: LocalStack,
) -> None:
    state = real_lab_stack.state()
    base = state["spawner_url"]
    headers = bearer(state["tokens"]["admin-user"]["token"])
    refused = requests.post(
        base + URL, headers=bearer(state["tokens"]["admin"]["token"]), timeout=10
    )
    assert refused.status_code == 403

    started = requests.post(base + URL, headers=headers, timeout=30)
    assert started.status_code in (200, 202), started.text
    namespace, name = started.json()["namespace"], started.json()["name"]

    def running() -> dict[str, Any] | None:
        body: dict[str, Any] = requests.get(base + URL, headers=headers, timeout=10).json()
        return body if body.get("phase") == "Running" and body.get("ready") else None

    status = wait_for(running, timeout=60)
    assert [m["path"] for m in status["mounts"]] == ["/mnt/home"]
    log_url = f"{real_lab_stack.kube.url}/api/v1/namespaces/{namespace}/pods/{name}/log"

    def log() -> str:
        answer = requests.get(log_url, timeout=10)
        return answer.text if answer.status_code == 200 else ""

    assert "fsadmin ready" in wait_for(lambda: "fsadmin ready" in (text := log()) and text)
    assert "mount /mnt/home: writable" in log()
    pod = real_lab_stack.kube.store.get("pods", namespace, name)
    assert pod is not None
    (pid,) = real_lab_stack.kube.cluster.processes.running(str(pod["metadata"]["uid"]))
    assert _alive(pid)

    deleted = requests.delete(base + URL, headers=headers, timeout=30)
    assert deleted.status_code == 202, deleted.text
    # Well inside the 30 s grace period: the process exits on SIGTERM, not on SIGKILL.
    wait_for(lambda: not _alive(pid), timeout=10)
    wait_for(lambda: real_lab_stack.kube.store.get("pods", namespace, name) is None, timeout=10)
    assert requests.get(base + URL, headers=headers, timeout=10).status_code == 404

"""Kernel records follow Kubernetes between operations: a kernel that ends is exited with its
exit code, one whose pod went behind the service's back has failed, saying so, records Redis
lost are rebuilt from the pods, and the reconcile deletes the pods of kernels whose lab is
gone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from flask import Flask

from app.config import Config, parse_config
from app.engine.reconcile import Reconciler
from app.extensions.labs import machinery_of
from app.workloads.kernel.tracking import GONE_ERROR
from devstack.kube import KubernetesEmulator
from devstack.kube.cluster.programs import ImageProgram
from tests.kernels.conftest import kernel_url, settled, start, with_lab
from tests.labs.conftest import LabUser, wait_for
from tests.labs.test_recovery import NEVER, leading


@pytest.fixture
def watched(kernel_config: dict[str, Any], make_app: Callable[[Config], Flask]) -> Flask:
    raw = {
        **kernel_config,
        "watcher": {"leaseSeconds": 1, "watchSeconds": 2, "reconcileSeconds": NEVER},
    }
    app = make_app(parse_config(raw))
    leading(app)
    return app


def _end(kube: KubernetesEmulator, namespace: str, name: str, code: int, reason: str) -> None:
    """The kernel's process ends as ``code``: its pod ends as a kubelet reports it."""
    pod = kube.store.get("pods", namespace, name)
    assert pod is not None
    status = pod["status"]
    status["phase"] = "Succeeded" if code == 0 else "Failed"
    for container in status["containerStatuses"]:
        container["ready"] = False
        container["state"] = {"terminated": {"exitCode": code, "reason": reason}}
    kube.store.update("pods", pod)


def test_an_ended_kernel_is_exited_and_one_deleted_behind_the_service_failed(
    watched: Flask, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    client = watched.test_client()
    user = new_user()
    with_lab(client, user)
    namespace = f"nublado-{user.username}"
    ended = start(client, user).get_json()["kernel_id"]
    gone = start(client, user).get_json()["kernel_id"]
    assert settled(client, user, ended)["status"] == "running"
    assert settled(client, user, gone)["status"] == "running"

    _end(kube, namespace, f"kernel-{ended}", 137, "OOMKilled")
    kube.store.delete("pods", namespace, f"kernel-{gone}")

    def status(kernel_id: str) -> dict[str, Any]:
        body: dict[str, Any] = client.get(kernel_url(user, kernel_id), headers=user.headers).json
        return body

    wait_for(lambda: status(ended)["status"] == "exited")
    assert (status(ended)["exit_code"], status(ended)["error"]) == (137, "OOMKilled")
    wait_for(lambda: status(gone)["status"] == "failed")
    assert status(gone)["error"] == GONE_ERROR
    # Neither holds anything any more: two new kernels fit the budget of two.
    assert start(client, user).status_code == 201
    assert start(client, user).status_code == 201


def test_kernel_records_are_rebuilt_after_redis_lost_them(
    watched: Flask, new_user: Callable[..., LabUser], redis_client: redis.Redis
) -> None:
    client = watched.test_client()
    user = new_user()
    with_lab(client, user)
    kernel_id = start(client, user, size="large").get_json()["kernel_id"]
    before = settled(client, user, kernel_id)

    redis_client.flushall()

    def rebuilt() -> dict[str, Any] | None:
        response = client.get(kernel_url(user, kernel_id), headers=user.headers)
        assert response.status_code in (200, 503), response.get_data(as_text=True)
        return response.get_json() if response.status_code == 200 else None

    assert wait_for(rebuilt) == before


def test_the_reconcile_deletes_kernels_whose_lab_pod_is_gone(
    watched: Flask, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    """A kernel belongs to the run of the lab it was started for: once that lab pod is gone
    (the lab failed and was made again, or was deleted by hand), nobody holds its key."""
    client = watched.test_client()
    user = new_user()
    with_lab(client, user)
    namespace = f"nublado-{user.username}"
    kernel_id = start(client, user).get_json()["kernel_id"]
    assert settled(client, user, kernel_id)["status"] == "running"
    machinery = machinery_of(watched)
    ctx = machinery.context
    reconciler = Reconciler(machinery.engine.store, ctx.kube, machinery.engine.kinds.values())
    reconciler.run()
    assert kube.store.get("pods", namespace, f"kernel-{kernel_id}") is not None, "lab is there"

    kube.store.delete("pods", namespace, f"nb-{user.username}-lab")
    reconciler.run()
    wait_for(lambda: kube.store.get("pods", namespace, f"kernel-{kernel_id}") is None)

    def failed() -> bool:
        body = client.get(kernel_url(user, kernel_id), headers=user.headers).get_json()
        return bool((body["status"], body["error"]) == ("failed", GONE_ERROR))

    wait_for(failed)


def test_a_kernel_whose_process_crashes_ends_with_its_exit_code(
    watched: Flask, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    """Not an injected status: the kernel's image runs a real process, whose Python stops at
    start-up with exit code 1. A kernel is not restarted (its state is its memory), so its
    pod ends, and the kernel fails with the exit code rather than reading running."""
    client = watched.test_client()
    user = new_user()
    with_lab(client, user)
    # The kernel pod's command is the image's Python: in this image, one that cannot start.
    kube.cluster.settings.programs = {
        "*/lsstsqre/sciplat-lab": ImageProgram(env={"PYTHONHOME": "/nonexistent"})
    }
    try:
        kernel_id = start(client, user).get_json()["kernel_id"]

        def ended() -> dict[str, Any] | None:
            body: dict[str, Any] = client.get(
                kernel_url(user, kernel_id), headers=user.headers
            ).json
            return body if body["status"] in ("exited", "failed") else None

        record = wait_for(ended, timeout=30)
    finally:
        kube.cluster.settings.programs = {}
    assert record["status"] == "failed", record
    assert "exited with code 1" in record["error"], record

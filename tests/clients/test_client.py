"""The Python client against the real service on the local stack (gunicorn, two workers)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from labspawner import (
    ConflictError,
    InvalidRequestError,
    LabSpawnerClient,
    NotAuthenticatedError,
    NotFoundError,
    PermissionDeniedError,
    ServiceUnavailableError,
)

from devstack.redis_process import free_port
from devstack.stack import LocalStack
from tests.clients.conftest import delete_lab
from tests.labs.conftest import wait_for
from tests.support.proxy import FaultProxy

USER = "wile"


@pytest.fixture
def user(
    stack: LocalStack, stack_tokens: dict[str, str], admin: LabSpawnerClient
) -> Iterator[LabSpawnerClient]:
    client = LabSpawnerClient(stack.spawner_url, stack_tokens[USER])
    yield client
    client.close()
    delete_lab(admin, USER)  # leave no lab behind for the next test


def test_spawn_wait_status_list_and_delete(
    stack: LocalStack,
    user: LabSpawnerClient,
    admin: LabSpawnerClient,
    lab_options: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = user.spawn(USER, lab_options, {"GREETING": "hello"}, wait=True, timeout=60)
    assert status is not None
    assert status.status == "running"
    assert status.running and not status.failed
    assert status.username == USER
    assert status.uid == 1102 and status.gid == 1500
    assert status.env["GREETING"] == "hello"
    assert status.options["size"] == "small"
    assert status.internal_url
    # The progress bar went to the terminal (stderr) and reached 100%.
    assert "100%" in capsys.readouterr().err

    # The lab's environment tells the client inside it where the service is.
    (env_map,) = [
        cm
        for cm in stack.kube.store.list("configmaps")
        if cm["metadata"]["name"] == f"nb-{USER}-env"
    ]
    assert env_map["data"]["LAB_SPAWNER_URL"] == stack.spawner_url

    assert USER in admin.list_labs()
    assert admin.lab_status(USER) == status
    operations = admin.operations()
    assert all(op["username"] != USER for op in operations)
    leaders = admin.leaders()
    assert set(leaders) == {"lab-watcher", "image-refresher", "prepuller"}
    for leader in leaders.values():
        # The elected loops run in the runner process.
        assert stack.runner_process is not None and leader is not None
        assert leader["replica"]["pid"] == stack.runner_process.pid

    final = admin.delete(USER, wait=True, timeout=30)
    assert final is not None and final.type == "complete"
    with pytest.raises(NotFoundError) as caught:
        admin.lab_status(USER)
    assert caught.value.status == 404 and caught.value.code == "not_found"
    assert USER not in admin.list_labs()


def test_spawn_without_wait_then_events_replay_and_resume(
    user: LabSpawnerClient, lab_options: dict[str, str]
) -> None:
    assert user.spawn(USER, lab_options) is None
    events = list(user.events(USER))
    types = [e.type for e in events]
    assert types[-1] == "complete"
    assert "progress" in types and "info" in types
    assert [e.percent for e in events if e.type == "progress"][-1] == 100
    ids = [e.id for e in events]
    assert all(ids) and len(set(ids)) == len(ids)

    # Resuming after an id yields exactly what followed it.
    middle = len(events) // 2
    resumed = list(user.events(USER, last_event_id=events[middle].id))
    assert resumed == events[middle + 1 :]


def test_a_dropped_stream_resumes_with_last_event_id(
    stack: LocalStack,
    stack_tokens: dict[str, str],
    user: LabSpawnerClient,
    proxy: FaultProxy,
    lab_options: dict[str, str],
) -> None:
    # The lab takes half a second to start, so the stream is cut while the spawn still
    # runs: a spawn that had ended would replay every event in the first read.
    settings = stack.kube.cluster.settings
    start_seconds, settings.start_seconds = settings.start_seconds, 0.5
    try:
        user.spawn(USER, lab_options)
        through_proxy = LabSpawnerClient(proxy.url, stack_tokens[USER], backoff=0.05)
        seen = []
        for event in through_proxy.events(USER):
            seen.append(event)
            if len(seen) == 1:
                proxy.cut()
        through_proxy.close()
    finally:
        settings.start_seconds = start_seconds
    assert seen[-1].type == "complete"
    # Nothing missed, nothing repeated: the same events as one uninterrupted replay.
    assert seen == list(user.events(USER))
    stream_heads = [h for h in proxy.heads if "/events" in h]
    assert len(stream_heads) >= 2
    # The reconnect asked for what followed the last event received before the cut.
    resumed_after = re.search(r"Last-Event-ID: (\S+)", stream_heads[1])
    assert resumed_after is not None
    assert resumed_after.group(1) in [e.id for e in seen[:-1]]


def test_errors_carry_code_message_and_field(
    stack: LocalStack,
    stack_tokens: dict[str, str],
    user: LabSpawnerClient,
    lab_options: dict[str, str],
) -> None:
    with pytest.raises(PermissionDeniedError) as denied:
        user.list_labs()
    assert denied.value.status == 403 and denied.value.code == "permission_denied"

    bad_token = "gt-" + "x" * 22 + ".not-a-real-secret"
    stranger = LabSpawnerClient(stack.spawner_url, bad_token)
    with pytest.raises(NotAuthenticatedError) as unauthenticated:
        stranger.user_status()
    assert bad_token not in str(unauthenticated.value)
    assert bad_token not in repr(stranger)

    with pytest.raises(InvalidRequestError) as invalid:
        user.spawn(USER, {**lab_options, "size": "enormous"})
    assert invalid.value.status == 422
    assert invalid.value.field == "options.size"
    assert "options.size" in str(invalid.value)

    with pytest.raises(NotFoundError):
        user.user_status()

    user.spawn(USER, lab_options)
    with pytest.raises(ConflictError) as conflict:
        user.spawn(USER, lab_options)
    assert conflict.value.status == 409
    user.wait(USER, timeout=30)


def test_form_images_and_prepulls(
    stack: LocalStack, user: LabSpawnerClient, admin: LabSpawnerClient
) -> None:
    form = user.spawn_form(USER)
    assert "<" in form and 'name="size"' in form
    images = admin.images()
    assert images["configs"]
    prepulls = admin.prepulls()
    assert "nodes" in prepulls or "configs" in prepulls
    with pytest.raises(PermissionDeniedError):
        user.images()


def test_configuration_from_the_environment(
    stack: LocalStack, stack_tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAB_SPAWNER_URL", stack.spawner_url + "/spawner/v1/")
    monkeypatch.delenv("LAB_SPAWNER_TOKEN", raising=False)
    monkeypatch.setenv("ACCESS_TOKEN", stack_tokens[USER])
    inside_lab = LabSpawnerClient()
    assert inside_lab.base_url == stack.spawner_url
    with pytest.raises(NotFoundError):
        inside_lab.user_status()  # authenticated as wile, who has no lab now

    monkeypatch.setenv("LAB_SPAWNER_TOKEN", stack_tokens["admin"])
    assert isinstance(LabSpawnerClient().list_labs(), list)  # LAB_SPAWNER_TOKEN wins

    monkeypatch.delenv("LAB_SPAWNER_TOKEN")
    monkeypatch.delenv("ACCESS_TOKEN")
    with pytest.raises(ValueError, match="no token"):
        LabSpawnerClient()
    monkeypatch.delenv("LAB_SPAWNER_URL")
    with pytest.raises(ValueError, match="LAB_SPAWNER_URL"):
        LabSpawnerClient(token="t")


def test_idempotent_calls_are_retried_and_spawns_are_not(
    stack_tokens: dict[str, str], proxy: FaultProxy, lab_options: dict[str, str]
) -> None:
    admin = LabSpawnerClient(proxy.url, stack_tokens["admin"], backoff=0.01)
    proxy.fail_next(2, status=503)
    assert isinstance(admin.list_labs(), list)
    assert len(proxy.heads) == 3  # two injected 503s, then the real answer

    user = LabSpawnerClient(proxy.url, stack_tokens[USER], backoff=0.01)
    proxy.heads.clear()
    proxy.fail_next(1, status=503)
    with pytest.raises(ServiceUnavailableError) as unavailable:
        user.spawn(USER, lab_options)
    assert unavailable.value.status == 503
    assert len(proxy.heads) == 1  # a POST is never repeated

    proxy.heads.clear()
    proxy.fail_next(4, status=502)
    fresh = LabSpawnerClient(proxy.url, stack_tokens["admin"], backoff=0.01)  # no pooled link
    with pytest.raises(ServiceUnavailableError):
        fresh.list_labs()
    assert len(proxy.heads) == 4  # the first try and three retries


def test_unreachable_and_silent_services_fail_within_the_timeouts(
    stack_tokens: dict[str, str], proxy: FaultProxy
) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    unreachable = LabSpawnerClient(url, stack_tokens["admin"], retries=1, backoff=0.01)
    with pytest.raises(ServiceUnavailableError) as refused:
        unreachable.list_labs()
    assert refused.value.code == "unavailable"

    silent = LabSpawnerClient(proxy.url, stack_tokens["admin"], timeout=(1.0, 0.3), retries=0)
    proxy.stall_next(1)
    started = time.monotonic()
    with pytest.raises(ServiceUnavailableError):
        silent.list_labs()
    assert time.monotonic() - started < 5


def test_the_maintenance_pod_through_the_client(
    stack: LocalStack, stack_tokens: dict[str, str], admin: LabSpawnerClient
) -> None:
    with LabSpawnerClient(stack.spawner_url, stack_tokens["admin-user"]) as pod_admin:
        started = pod_admin.start_admin_pod()
        assert started["image"].endswith("/lsstsqre/fsadmin:1.0")
        assert [m["path"] for m in started["mounts"]] == ["/mnt/home"]
        status = wait_for(lambda: (s := pod_admin.admin_pod()) and s["ready"] and s, timeout=30)
        assert status["phase"] == "Running"
        deleted = pod_admin.delete_admin_pod()
        assert deleted["terminating"] is True
        wait_for(lambda: pod_admin.admin_pod() is None, timeout=30)
        with pytest.raises(NotFoundError):
            pod_admin.delete_admin_pod()
    # JupyterHub's token holds admin:notebook, not the maintenance pod's scope.
    with pytest.raises(PermissionDeniedError):
        admin.admin_pod()

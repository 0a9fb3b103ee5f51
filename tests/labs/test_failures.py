"""Spawns that cannot succeed fail fast, with a reason a user can act on."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.builders.names import MANAGED_BY, MANAGED_BY_LABEL
from devstack.kube import KubernetesEmulator
from devstack.kube.cluster.programs import ImageProgram
from tests.labs.conftest import LabUser, read_events, spawn_body


def _spawn_and_read(
    client: FlaskClient, user: LabUser, **options: str
) -> tuple[list[str], list[str], float]:
    started = time.monotonic()
    response = client.post(
        f"/spawner/v1/labs/{user.username}/spawn",
        json=spawn_body(**options),
        headers=user.headers,
    )
    assert response.status_code == 303
    events = read_events(client, user.username, user.headers)
    elapsed = time.monotonic() - started
    return [e.type for e in events], [e.data for e in events if e.type == "error"], elapsed


@pytest.mark.parametrize(
    ("fault", "pattern", "expected"),
    [
        ("unschedulable", "nublado-*/*", "cannot be scheduled"),
        ("crash_loop", "*sciplat-lab*", "keeps crashing (CrashLoopBackOff, last exit code 1)"),
        ("image_pull", "*:fresh-*", "cannot pull image"),
    ],
)
def test_failure_kinds_fail_within_seconds(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
    fresh_image: str,
    fault: str,
    pattern: str,
    expected: str,
) -> None:
    user = new_user()
    kube.cluster.faults.set(fault, pattern, "injected by the test")
    try:
        types, errors, elapsed = _spawn_and_read(lab_client, user, image=fresh_image)
    finally:
        kube.cluster.faults.clear()
    assert types[-1] == "failed"
    assert any(expected in e for e in errors), errors
    # The spawn deadline is 30 s in these tests; failing fast means far sooner.
    assert elapsed < 10
    status = lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
    body = status.get_json()
    assert body["status"] == "failed"
    assert expected in body["error"]


def test_missing_copied_secret_fails_with_the_key_named(
    lab_raw_config: dict[str, object],
    make_app: Callable[..., object],
    new_user: Callable[..., LabUser],
) -> None:
    from app.config import parse_config

    lab = lab_raw_config["lab"]
    assert isinstance(lab, dict)
    lab["secrets"] = [{"secretName": "absent-secret", "secretKey": "api-key"}]
    client = make_app(parse_config(lab_raw_config)).test_client()  # type: ignore[attr-defined]
    user = new_user()
    types, errors, _ = _spawn_and_read(client, user)
    assert types[-1] == "failed"
    assert any("absent-secret" in e and "api-key" in e for e in errors)


def test_spawn_deadline(
    lab_raw_config: dict[str, object],
    make_app: Callable[..., object],
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
    slow_image: Callable[[float], str],
) -> None:
    from app.config import parse_config

    lab = lab_raw_config["lab"]
    assert isinstance(lab, dict)
    lab["spawnTimeout"] = 1.5
    # An image no node has cached yet, so the simulated pull time applies.
    slow = slow_image(30.0)
    client = make_app(parse_config(lab_raw_config)).test_client()  # type: ignore[attr-defined]
    user = new_user()
    types, errors, elapsed = _spawn_and_read(client, user, image=slow)
    assert types[-1] == "failed"
    assert any("did not finish within 1.5 seconds" in e for e in errors)
    assert elapsed < 6


def test_quota_rejection_fails_with_the_api_servers_reason(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    user = new_user()
    namespace = f"nublado-{user.username}"
    # An administrator's quota in the user's namespace (one of the service's, left from an
    # earlier lab), tighter than the chosen size.
    kube.store.create(
        "namespaces",
        {"metadata": {"name": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY}}},
    )
    kube.store.create(
        "resourcequotas",
        {
            "metadata": {"name": "admin-limit", "namespace": namespace},
            "spec": {"hard": {"limits.memory": "1Gi"}},
        },
    )
    types, errors, elapsed = _spawn_and_read(lab_client, user)
    assert types[-1] == "failed"
    assert any(
        "Kubernetes refused the lab" in e and "exceeded quota: admin-limit" in e for e in errors
    )
    assert elapsed < 10
    body = lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers).get_json()
    assert body["status"] == "failed"
    assert body["pod"] == "missing"


def test_transient_api_errors_and_timeouts_are_retried(
    lab_raw_config: dict[str, Any],
    make_app: Callable[..., Any],
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
) -> None:
    from app.config import parse_config

    lab_raw_config["kubernetes"]["requestTimeout"] = 0.5
    client = make_app(parse_config(lab_raw_config)).test_client()
    user = new_user()
    kube.faults.fail(count=2, verb="create", resource="configmaps", code=503)
    kube.faults.fail(count=1, verb="get", resource="pods", code=500)
    kube.faults.time_out(count=1, verb="create", resource="pods", hold=1.5)
    try:
        types, errors, _ = _spawn_and_read(client, user)
    finally:
        kube.faults.clear()
    assert types[-1] == "complete", errors
    pods = kube.store.list("pods", f"nublado-{user.username}")
    assert [p["metadata"]["name"] for p in pods] == [f"nb-{user.username}-lab"]


def test_a_namespace_that_is_not_ours_is_left_alone(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
    admin_headers: dict[str, str],
) -> None:
    """A namespace with the lab's name that the service did not make (no labels of ours) is
    never written into: the spawn fails naming it, and the namespace stays empty."""
    user = new_user()
    namespace = f"nublado-{user.username}"
    kube.store.create(
        "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    types, errors, _ = _spawn_and_read(lab_client, user)
    assert types[-1] == "failed"
    assert any(f"namespace {namespace} exists and is not ours" in e for e in errors), errors
    assert kube.store.get("namespaces", None, namespace) is not None
    for resource in ("secrets", "configmaps", "pods", "services"):
        assert not [
            o
            for o in kube.store.list(resource)
            if o["metadata"]["namespace"] == namespace and o["metadata"]["name"].startswith("nb-")
        ], resource
    # Deleting the failed lab leaves the foreign namespace in place.
    response = lab_client.delete(f"/spawner/v1/labs/{user.username}", headers=admin_headers)
    assert response.status_code == 202
    events = read_events(lab_client, user.username, admin_headers)
    assert events[-1].type == "complete"
    assert any("is not the service's" in e.data for e in events)
    assert kube.store.get("namespaces", None, namespace) is not None


def test_a_lab_whose_process_crashes_fails_with_its_exit_code(
    lab_client: FlaskClient,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    """Not an injected fault: the lab image runs a real process that exits with code 3, the
    kubelet restarts it with back-off, and the spawn fails on the crash loop it sees."""
    crash = "import sys; print('the lab cannot start'); sys.exit(3)"
    kube.cluster.settings.programs = {
        "*/lsstsqre/sciplat-lab": ImageProgram(entrypoint=(sys.executable, "-c", crash))
    }
    user = new_user()
    try:
        types, errors, _ = _spawn_and_read(lab_client, user)
    finally:
        kube.cluster.settings.programs = {}
    assert types[-1] == "failed"
    expected = "the lab container notebook keeps crashing (CrashLoopBackOff, last exit code 3)"
    assert any(expected in e for e in errors), errors
    body = lab_client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers).get_json()
    assert body["status"] == "failed" and expected in body["error"]

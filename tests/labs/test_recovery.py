"""The elected watcher and the reconcile: Redis follows Kubernetes, never the other way.

Each test sets the watcher's intervals for what it proves. Where the watch itself must be
what noticed a change, the periodic reconcile is pushed out of reach (an hour) and the test
checks that no further reconcile ran.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from app.builders.names import MANAGED_BY, MANAGED_BY_LABEL, USER_LABEL
from app.engine.reconcile import Reconciler
from app.engine.watcher import WorkloadWatcher
from app.extensions.labs import machinery_of, stop_background
from app.models.lab import LabRecord, PodState
from app.models.workload import WorkloadStatus
from app.workloads.context import WorkloadContext
from devstack.gafaelfawr import GafaelfawrEmulator, GroupSpec
from devstack.kube import KubernetesEmulator
from tests.labs.conftest import (
    LabUser,
    MakeApp,
    lab_config,
    read_events,
    spawn_body,
    wait_for,
)
from tests.support.redis_server import RedisServer

NEVER = 3600.0
"""A reconcile interval no test reaches: only the reconcile at the start of a tenure runs."""

DELETED = "the lab pod was deleted outside the spawner"


def watcher_of(app: Flask) -> WorkloadWatcher:
    watcher: WorkloadWatcher = machinery_of(app).watcher
    return watcher


def context_of(app: Flask) -> WorkloadContext:
    ctx: WorkloadContext = machinery_of(app).context
    return ctx


def leading(app: Flask) -> WorkloadWatcher:
    """Wait until the app's watcher leads and has finished its first reconcile.

    The reconcile starts only after the watch's first list, so from here on every
    change to a lab pod reaches the watch.
    """
    watcher = watcher_of(app)
    wait_for(lambda: watcher.is_leader and watcher.reconciles >= 1, timeout=10)
    return watcher


def spawn(client: FlaskClient, user: LabUser, **options: Any) -> None:
    response = client.post(
        f"/spawner/v1/labs/{user.username}/spawn",
        json=spawn_body(**options),
        headers=user.headers,
    )
    assert response.status_code == 303, response.get_data(as_text=True)


def spawn_running(client: FlaskClient, user: LabUser, **options: Any) -> None:
    spawn(client, user, **options)
    events = read_events(client, user.username, user.headers)
    assert events[-1].type == "complete", [e.data for e in events]


def status_of(client: FlaskClient, username: str, headers: dict[str, str]) -> dict[str, Any]:
    response = client.get(f"/spawner/v1/labs/{username}", headers=headers)
    if response.status_code == 404:
        return {}
    assert response.status_code == 200, response.get_data(as_text=True)
    body: dict[str, Any] = response.get_json()
    return body


def pod_key(username: str) -> tuple[str, str]:
    return f"nublado-{username}", f"nb-{username}-lab"


def evict(kube: KubernetesEmulator, username: str) -> None:
    """Make the lab pod stop for good, as an eviction by the kubelet does."""

    def change(pod: dict[str, Any]) -> None:
        status = pod["status"]
        status.update(
            phase="Failed", reason="Evicted", message="The node was low on resource: memory."
        )
        for condition in status.get("conditions") or []:
            if condition["type"] in ("Ready", "ContainersReady"):
                condition["status"] = "False"

    namespace, name = pod_key(username)
    kube.store.mutate("pods", namespace, name, change)


def our_namespace(name: str, username: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, USER_LABEL: username},
        },
    }


# The watch -----------------------------------------------------------------------------


def test_pod_deleted_behind_the_services_back_fails_the_lab(
    watcher_app: MakeApp,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    app = watcher_app(reconcileSeconds=NEVER)
    client = app.test_client()
    watcher = leading(app)
    user = new_user()
    spawn_running(client, user)
    before = status_of(client, user.username, admin_headers)
    reconciles = watcher.reconciles

    assert kube.store.delete("pods", *pod_key(user.username)) is not None

    after = wait_for(
        lambda: (
            (s := status_of(client, user.username, admin_headers)).get("status") == "failed" and s
        )
    )
    assert after["pod"] == "missing"
    assert after["error"] == DELETED
    assert {k: v for k, v in after.items() if k not in ("status", "pod", "error")} == {
        k: v for k, v in before.items() if k not in ("status", "pod", "error")
    }
    assert watcher.reconciles == reconciles  # the watch noticed, not a reconcile

    # A failed lab can be replaced at once.
    spawn_running(client, user)
    assert status_of(client, user.username, admin_headers)["status"] == "running"


def test_pod_that_stops_outside_an_operation_fails_the_lab(
    watcher_app: MakeApp,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    app = watcher_app(reconcileSeconds=NEVER)
    client = app.test_client()
    watcher = leading(app)
    user = new_user()
    spawn_running(client, user)
    reconciles = watcher.reconciles

    evict(kube, user.username)

    after = wait_for(
        lambda: (
            (s := status_of(client, user.username, admin_headers)).get("status") == "failed" and s
        )
    )
    assert after["pod"] == "present"
    assert after["error"] == "the lab pod stopped: Evicted: The node was low on resource: memory."
    assert watcher.reconciles == reconciles


def test_watcher_relists_after_410_and_catches_what_it_missed(
    redis_client: redis.Redis,
    redis_server: RedisServer,
    gafaelfawr: GafaelfawrEmulator,
    watcher_app: MakeApp,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
) -> None:
    # A cluster of its own whose watch history is short enough to outrun.
    with KubernetesEmulator(watch_history=40) as small:
        small.cluster.add_node("node-1")
        app = watcher_app(
            lab_config(redis_server.url, gafaelfawr.url, small.url), reconcileSeconds=NEVER
        )
        client = app.test_client()
        watcher = leading(app)
        user = new_user()
        spawn_running(client, user)
        reconciles = watcher.reconciles
        lists_before = len(small.audit.entries(verb="list", resource="pods", namespace=""))

        # Take the watch down and keep it down while the pod goes and history rolls over.
        small.faults.fail(verb="watch", resource="pods")
        small.faults.drop_watches()
        wait_for(lambda: small.audit.entries(verb="watch", resource="pods", code=500))
        assert small.store.delete("pods", *pod_key(user.username)) is not None
        for index in range(60):
            small.store.create(
                "configmaps", {"metadata": {"name": f"churn-{index}", "namespace": "default"}}
            )
        small.faults.clear()

        after = wait_for(
            lambda: (
                (s := status_of(client, user.username, admin_headers)).get("status") == "failed"
                and s
            ),
            timeout=10,
        )
        assert after["pod"] == "missing"
        assert after["error"] == DELETED
        # Caught by a reconcile that a re-list after 410 asked for (each tracked kind's
        # watch lost its place, and each asks for one; none comes on a timer here). The
        # reconcile counts once it has been through every kind, after this lab's repair.
        wait_for(lambda: watcher.reconciles > reconciles, timeout=10)
        assert len(small.audit.entries(verb="list", resource="pods", namespace="")) > lists_before
        stop_background(app)


# The reconcile -------------------------------------------------------------------------


def test_a_rebuild_reads_the_labs_services_in_one_list_when_urls_name_their_address(
    watcher_app: MakeApp,
    lab_raw_config: dict[str, Any],
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    redis_client: redis.Redis,
    kube: KubernetesEmulator,
) -> None:
    """With ``lab.internalUrl`` naming ``{cluster_ip}``, a rebuilt record needs its Service:
    the reconcile lists every lab's Service once instead of reading each one."""
    raw = copy.deepcopy(lab_raw_config)
    raw["lab"]["internalUrl"] = "http://{cluster_ip}:{port}"
    app = watcher_app(raw, reconcileSeconds=NEVER)
    client = app.test_client()
    watcher = leading(app)
    users = [new_user() for _ in range(3)]
    for user in users:
        spawn_running(client, user)
    expected = {u.username: status_of(client, u.username, admin_headers) for u in users}
    for username, status in expected.items():
        service = kube.store.get("services", f"nublado-{username}", f"nb-{username}-lab")
        assert service is not None
        port = app.config["SPAWNER"].lab.port
        assert status["internal_url"] == f"http://{service['spec']['clusterIP']}:{port}"
    reconciles = watcher.reconciles
    kube.audit.clear()

    redis_client.flushall()
    wait_for(lambda: watcher.reconciles > reconciles and watcher.is_leader)
    for username, before in expected.items():
        assert wait_for(lambda u=username: status_of(client, u, admin_headers)) == before
    assert kube.audit.entries(verb="get", resource="services") == []
    assert kube.audit.entries(verb="list", resource="services")


def test_flushall_restores_every_lab_in_one_reconcile(
    watcher_app: MakeApp,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    redis_client: redis.Redis,
    kube: KubernetesEmulator,
) -> None:
    """After Redis comes back empty, reads never say "no lab" or give a partial list while
    the records are rebuilt: they answer 503 ``rebuilding`` with ``Retry-After`` until the
    rebuild is done, then exactly what they answered before."""
    app = watcher_app(reconcileSeconds=NEVER)
    client = app.test_client()
    watcher = leading(app)
    plain = new_user()
    fancy = new_user(groups=(GroupSpec("astro", 4242), GroupSpec("unix-less")))
    spawn_running(client, plain)
    spawn_running(client, fancy, size="large", debug=True)
    expected = {u.username: status_of(client, u.username, admin_headers) for u in (plain, fancy)}
    assert expected[fancy.username]["options"]["debug"] is True
    assert expected[fancy.username]["quotas"]["limits"]["cpu"] == 4.0
    assert {g["name"] for g in expected[fancy.username]["groups"]} == {"astro", "unix-less"}
    reconciles = watcher.reconciles
    # A slow list of lab pods holds the rebuild open long enough to be seen.
    kube.faults.add_latency(0.5, verb="list", resource="pods")

    redis_client.flushall()

    # The lease went with the data: a new tenure starts with one reconcile.
    answers: list[int] = []

    def rebuilt() -> bool:
        listed = client.get("/spawner/v1/labs", headers=admin_headers)
        answers.append(listed.status_code)
        if listed.status_code == 503:
            assert listed.get_json()["code"] == "rebuilding"
            assert int(listed.headers["Retry-After"]) >= 1
        else:
            assert listed.status_code == 200
            assert set(expected) <= set(listed.get_json()), "a partial list"
        for username, before in expected.items():
            response = client.get(f"/spawner/v1/labs/{username}", headers=admin_headers)
            answers.append(response.status_code)
            assert response.status_code in (200, 503), response.get_data(as_text=True)
            if response.status_code == 503:
                assert response.get_json()["code"] == "rebuilding"
                return False
            assert response.get_json() == before
        return listed.status_code == 200

    wait_for(rebuilt)
    kube.faults.clear()
    assert 503 in answers and 404 not in answers
    assert all(s["status"] == "running" for s in expected.values())
    # One reconcile is enough; a slow machine may lose and retake the lease meanwhile, and
    # every new tenure starts with a reconcile of its own. The records are written during
    # the reconcile and it is counted when it returns, so the count may lag them a moment.
    wait_for(lambda: watcher.reconciles >= reconciles + 1)
    assert client.get("/readyz").get_json()["checks"]["state"] == "ok"


def test_rebuilt_record_reads_the_services_address_for_its_url(
    watcher_app: MakeApp,
    lab_raw_config: dict[str, Any],
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    redis_client: redis.Redis,
) -> None:
    """With ``{cluster_ip}`` in ``lab.internalUrl`` a record rebuilt from its pod alone finds
    the URL by reading the lab's Service: the status after the rebuild is the one before."""
    raw = copy.deepcopy(lab_raw_config)
    raw["lab"]["internalUrl"] = "http://{cluster_ip}:{port}"
    app = watcher_app(raw, reconcileSeconds=NEVER)
    client = app.test_client()
    watcher = leading(app)
    user = new_user()
    spawn_running(client, user)
    before = status_of(client, user.username, admin_headers)
    assert before["internal_url"].startswith("http://") and before["internal_url"] != "http://:8888"
    reconciles = watcher.reconciles

    redis_client.flushall()

    wait_for(lambda: watcher.reconciles > reconciles)
    wait_for(
        lambda: (
            client.get(f"/spawner/v1/labs/{user.username}", headers=admin_headers).status_code
            == 200
        )
    )
    assert status_of(client, user.username, admin_headers) == before


def test_leaked_namespace_is_deleted_only_when_seen_twice(
    watcher_app: MakeApp,
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
) -> None:
    app = watcher_app(reconcileSeconds=NEVER)
    leading(app)  # its own reconcile is done and will not run again
    ctx = context_of(app)
    leaked, kept = new_user().username, new_user().username
    kube.store.create("namespaces", our_namespace(f"nublado-{leaked}", leaked))
    kube.store.create("namespaces", our_namespace(f"nublado-{kept}", kept))
    # Not a lab namespace, though labelled as ours: never the reconcile's to remove.
    kube.store.create("namespaces", our_namespace(f"elsewhere-{leaked}", leaked))
    # A lab whose pod went away keeps its namespace until someone deletes the lab.
    record = LabRecord(
        username=kept,
        status=WorkloadStatus.FAILED,
        pod=PodState.MISSING,
        options={},
        env={},
        uid=None,
        gid=None,
        groups=[],
        quotas={},
        error=DELETED,
    )
    assert ctx.labs.put_if_idle(record, None)

    machinery = machinery_of(app)
    reconciler = Reconciler(machinery.engine.store, ctx.kube, machinery.engine.kinds.values())
    reconciler.run()
    assert f"nublado-{leaked}" in reconciler.suspects
    assert kube.store.get("namespaces", None, f"nublado-{leaked}") is not None

    reconciler.run()
    wait_for(lambda: kube.store.get("namespaces", None, f"nublado-{leaked}") is None)
    assert kube.store.get("namespaces", None, f"nublado-{kept}") is not None
    assert kube.store.get("namespaces", None, f"elsewhere-{leaked}") is not None
    assert ctx.labs.get(kept) == record
    for name in (f"nublado-{kept}", f"elsewhere-{leaked}"):
        kube.store.delete("namespaces", None, name)


def test_watcher_never_touches_a_lab_during_a_spawn(
    watcher_app: MakeApp,
    new_user: Callable[..., LabUser],
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    app = watcher_app(reconcileSeconds=0.1)
    client = app.test_client()
    watcher = leading(app)
    ctx = context_of(app)
    user = new_user()
    spawn_running(client, user)
    evict(kube, user.username)
    wait_for(lambda: status_of(client, user.username, admin_headers).get("status") == "failed")

    # The replacing spawn deletes the dead pod (a DELETED event), then waits on a slow pod
    # create while reconciles find a lab record with no pod behind it. The create is held
    # until three reconciles have run (within the client's 5 s deadline), then released.
    kube.faults.add_latency(4.5, verb="create", resource="pods")
    try:
        spawn(client, user)
        reconciles = watcher.reconciles
        seen: list[str] = []

        def reconciled_during_spawn() -> bool:
            seen.append(status_of(client, user.username, admin_headers)["status"])
            return watcher.reconciles >= reconciles + 3

        wait_for(reconciled_during_spawn)
        assert ctx.labs.has_operation(user.username), "the spawn ended too soon"
        assert not kube.store.list("pods", f"nublado-{user.username}")
    finally:
        kube.faults.clear()
    events = read_events(client, user.username, user.headers)

    assert set(seen) == {"starting"}
    assert [e.type for e in events][-1] == "complete"
    assert not any(e.type == "failed" for e in events)
    final = status_of(client, user.username, admin_headers)
    assert (final["status"], final["pod"], final["error"]) == ("running", "present", None)


# The election --------------------------------------------------------------------------


def lease_owner(client: redis.Redis, key: str) -> str | None:
    """The worker an elected loop's lease names (its value is a JSON object)."""
    value = client.get(key)
    return str(json.loads(value)["owner"]) if value else None


@pytest.fixture
def two_workers(watcher_app: MakeApp) -> Iterator[tuple[Flask, Flask]]:
    # Leases of 4 s: long enough that a handover is told apart from an expiry by a margin
    # a busy machine keeps, short enough that candidates look every second.
    yield (
        watcher_app(reconcileSeconds=NEVER, leaseSeconds=HANDOVER_LEASE_SECONDS),
        watcher_app(reconcileSeconds=NEVER, leaseSeconds=HANDOVER_LEASE_SECONDS),
    )


HANDOVER_LEASE_SECONDS = 4


def test_two_workers_elect_one_watcher_and_hand_over_on_stop(
    two_workers: tuple[Flask, Flask], redis_client: redis.Redis
) -> None:
    apps = two_workers
    watchers = [watcher_of(a) for a in apps]
    key = watchers[0].lease_key
    wait_for(lambda: any(w.is_leader for w in watchers))

    # Watch the lease being renewed twice; at every look exactly one worker leads.
    renewals: list[int] = []
    last_ttl = [int(redis_client.pttl(key))]

    def renewed_twice() -> bool:
        leaders = [w for w in watchers if w.is_leader]
        assert len(leaders) == 1
        assert lease_owner(redis_client, key) == leaders[0].owner
        ttl = int(redis_client.pttl(key))
        if ttl > last_ttl[0]:
            renewals.append(ttl)
        last_ttl[0] = ttl
        return len(renewals) >= 2

    wait_for(renewed_twice, timeout=5 * HANDOVER_LEASE_SECONDS, interval=0.02)

    index = next(i for i, w in enumerate(watchers) if w.is_leader)
    leader, other = watchers[index], watchers[1 - index]
    # Stop the whole app in the background: the handover is timed, not the app's shutdown.
    stopping = threading.Thread(target=stop_background, args=(apps[index],))
    started = time.monotonic()
    unexpired = int(redis_client.pttl(key)) / 1000
    stopping.start()
    wait_for(lambda: other.is_leader, timeout=2 * HANDOVER_LEASE_SECONDS)
    # The stopped leader gave its lease up: the other took it before it could have expired.
    assert time.monotonic() - started < unexpired
    stopping.join()
    assert not leader.is_leader
    assert lease_owner(redis_client, key) == other.owner


def test_a_dead_leaders_lease_expires_and_another_worker_takes_over(
    watcher_app: MakeApp, redis_client: redis.Redis
) -> None:
    # A leader that died without releasing: its lease stays until it expires.
    key = "spawner:leader:lab-watcher"
    redis_client.set(key, "dead-worker", px=1500)
    started = time.monotonic()
    app = watcher_app(reconcileSeconds=NEVER)
    watcher = watcher_of(app)
    assert watcher.lease_key == key

    def took_over() -> bool:
        if redis_client.get(key) == "dead-worker":
            assert not watcher.is_leader
        return watcher.is_leader

    wait_for(took_over, timeout=5, interval=0.02)
    # Not before the dead leader's lease ran out (how soon after is the benchmarks' business).
    assert time.monotonic() - started > 1.3
    assert lease_owner(redis_client, key) == watcher.owner

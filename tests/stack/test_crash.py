"""Killing the worker that runs a spawn: another worker resumes it, with no duplicates,
whichever of the spawn's Kubernetes calls it was making when it died. Killing the whole
service in the middle of a cluster's scale: once it is back, the cluster's record is what
Kubernetes runs."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import requests

from devstack.stack import LocalStack, StackOptions
from tests.support.sse import SseEvent, parse_sse


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("devstack-crash"),
        workers=2,
        # The runner killed mid-spawn is started again, as the kubelet would; its successor
        # resumes the spawn once the killed run's lease expires.
        pull_seconds=3.0,
        # A lab takes a moment to start, so a spawn always follows its pod (watch, Events).
        start_seconds=1.0,
        config_overrides={
            "operations": {"leaseSeconds": 2, "scanSeconds": 0.5},
            # A killed service's leadership passes to its successor within seconds, and the
            # reconcile runs again every few seconds after the one that starts its tenure:
            # what the API server finishes after that one (a held call let go) is seen too.
            "watcher": {"leaseSeconds": 2, "reconcileSeconds": 3},
            "limits": {"mutationsPerMinute": 1000},
        },
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()


def _wait(predicate: object, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()  # type: ignore[operator]
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_sigkill_mid_spawn_ends_with_one_running_lab(stack: LocalStack) -> None:
    state = stack.state()
    user = {"Authorization": f"Bearer {state['tokens']['rachel']['token']}"}
    admin = {"Authorization": f"Bearer {state['tokens']['admin']['token']}"}
    base = f"{stack.spawner_url}/spawner/v1"
    image = stack.demo_image
    store = redis.Redis.from_url(stack.redis_url, decode_responses=True)

    response = requests.post(
        f"{base}/labs/rachel/spawn",
        json={"options": {"image": image, "size": "small"}, "env": {}},
        headers=user,
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 303
    namespace = "nublado-rachel"
    # Wait until the pod exists and its image is being pulled, then kill the process
    # holding the spawn's lease: the runner, never the web worker that queued it.
    _wait(lambda: stack.kube.store.get("pods", namespace, "nb-rachel-lab"))
    holder = str(_wait(lambda: store.get("spawner:lease:lab:rachel")))
    pid = int(holder.split(":")[1])
    replica = stack.replicas[0]
    assert pid in replica.runner_pids()
    assert pid not in replica.worker_pids()
    os.kill(pid, signal.SIGKILL)

    with requests.get(f"{base}/labs/rachel/events", headers=user, stream=True, timeout=60) as r:
        events = [e for e in parse_sse(r.iter_content(None)) if isinstance(e, SseEvent)]
    assert events[-1].type == "complete"
    # The killed worker's run and the resumed run each announced the start.
    starts = [e for e in events if e.type == "info" and e.data.startswith("Starting a lab")]
    assert len(starts) == 2
    status = requests.get(f"{base}/labs/rachel", headers=admin, timeout=5).json()
    assert status["status"] == "running"
    assert status["pod"] == "present"

    pods = stack.kube.store.list("pods", namespace)
    assert [p["metadata"]["name"] for p in pods] == ["nb-rachel-lab"]
    configmaps = sorted(
        c["metadata"]["name"]
        for c in stack.kube.store.list("configmaps", namespace)
        if c["metadata"]["name"].startswith("nb-")
    )
    assert configmaps == ["nb-rachel-env", "nb-rachel-nss"]
    _wait(lambda: store.get("spawner:lease:lab:rachel") is None)
    # The killed runner was started again; the web's gunicorn never stopped.
    _wait(lambda: replica.runner_pids())
    assert pid not in replica.runner_pids()
    assert stack.spawner_process is not None and stack.spawner_process.poll() is None

    assert requests.delete(f"{base}/labs/rachel", headers=admin, timeout=5).status_code == 202
    with requests.get(f"{base}/labs/rachel/events", headers=user, stream=True, timeout=60) as r:
        events = [e for e in parse_sse(r.iter_content(None)) if isinstance(e, SseEvent)]
    assert events[-1].type == "complete"
    assert stack.kube.store.get("namespaces", None, namespace) is None


def _spawn_calls(stack: LocalStack, spawn: Callable[[], list[SseEvent]]) -> list[tuple[str, str]]:
    """The distinct Kubernetes calls a spawn of rachel's lab makes, in the order it makes
    them: (verb, resource) of each request about her namespace or in it."""
    namespace = "nublado-rachel"
    started = time.time()
    events = spawn()
    assert events[-1].type == "complete"
    calls: list[tuple[str, str]] = []
    for entry in stack.kube.audit.entries():
        if entry.timestamp < started:
            continue
        # A namespace's create names it in its body only: the path has no name.
        ours = entry.namespace == namespace or (
            entry.resource == "namespaces" and entry.name in (namespace, "")
        )
        if ours and (entry.verb, entry.resource) not in calls:
            calls.append((entry.verb, entry.resource))
    return calls


def test_a_worker_killed_at_each_step_of_a_spawn_leaves_exactly_one_lab(
    stack: LocalStack,
) -> None:
    """For every Kubernetes call a spawn makes, in turn: hold that call on arrival, kill
    (SIGKILL) the worker that sent it, let the call through (the API server had it), and
    require the spawn resumed by another worker to end with exactly one running lab."""
    state = stack.state()
    user = {"Authorization": f"Bearer {state['tokens']['rachel']['token']}"}
    admin = {"Authorization": f"Bearer {state['tokens']['admin']['token']}"}
    base = f"{stack.spawner_url}/spawner/v1"
    namespace = "nublado-rachel"
    store = redis.Redis.from_url(stack.redis_url, decode_responses=True)

    def post_spawn() -> None:
        response = requests.post(
            f"{base}/labs/rachel/spawn",
            json={"options": {"image": stack.demo_image, "size": "small"}, "env": {}},
            headers=user,
            allow_redirects=False,
            timeout=10,
        )
        assert response.status_code == 303, response.text

    def events() -> list[SseEvent]:
        with requests.get(f"{base}/labs/rachel/events", headers=user, stream=True, timeout=60) as r:
            return [e for e in parse_sse(r.iter_content(None)) if isinstance(e, SseEvent)]

    def delete() -> None:
        assert requests.delete(f"{base}/labs/rachel", headers=admin, timeout=5).status_code == 202
        assert events()[-1].type == "complete"
        _wait(lambda: stack.kube.store.get("namespaces", None, namespace) is None)

    def spawn() -> list[SseEvent]:
        post_spawn()
        return events()

    steps = _spawn_calls(stack, spawn)
    delete()
    assert ("create", "namespaces") in steps and ("create", "pods") in steps, steps
    assert len(steps) >= 8, steps
    exercised = []
    for verb, resource in steps:
        scope = None if resource == "namespaces" else namespace
        pause = stack.kube.faults.pause_next(verb, resource, namespace=scope)
        try:
            post_spawn()
            # A call that follows the pod may not come when the pod is ready at once.
            _wait(lambda: pause.arrived.is_set() or _running(base, admin))  # noqa: B023
            if pause.arrived.is_set():
                holder = str(_wait(lambda: store.get("spawner:lease:lab:rachel")))
                os.kill(int(holder.split(":")[1]), signal.SIGKILL)
                exercised.append((verb, resource))
        finally:
            stack.kube.faults.cancel(pause)
        ended = events()
        assert ended[-1].type == "complete", (verb, resource, [e.data for e in ended])
        status = requests.get(f"{base}/labs/rachel", headers=admin, timeout=5).json()
        assert (status["status"], status["pod"]) == ("running", "present"), (verb, resource)
        pods = [p["metadata"]["name"] for p in stack.kube.store.list("pods", namespace)]
        assert pods == ["nb-rachel-lab"], (verb, resource, pods)
        configmaps = sorted(
            c["metadata"]["name"]
            for c in stack.kube.store.list("configmaps", namespace)
            if c["metadata"]["name"].startswith("nb-")
        )
        assert configmaps == ["nb-rachel-env", "nb-rachel-nss"], (verb, resource)
        delete()
    # Every create and the pod's read were each interrupted by a kill. The pod's changes come
    # on the runner's shared watch of lab pods, not on a call of the spawn's own: the kill
    # while the spawn follows its pod is the test above.
    assert {s for s in steps if s[0] == "create"} <= set(exercised), exercised
    assert ("get", "pods") in exercised, exercised
    assert stack.spawner_process is not None and stack.spawner_process.poll() is None


def _running(base: str, admin: dict[str, str]) -> bool:
    response = requests.get(f"{base}/labs/rachel", headers=admin, timeout=5)
    return response.status_code == 200 and response.json()["status"] == "running"


def test_a_service_killed_in_the_middle_of_a_scale_comes_back_in_step(stack: LocalStack) -> None:
    """The scale's patch reaches the API server, and the whole service is killed before it
    can record it: after the restart the record (workers, usage) is what the cluster runs,
    and the next scale counts from there."""
    state = stack.state()
    user = {"Authorization": f"Bearer {state['tokens']['rachel']['token']}"}
    admin = {"Authorization": f"Bearer {state['tokens']['admin']['token']}"}
    base = f"{stack.spawner_url}/spawner/v1"
    namespace = "nublado-rachel"
    spawned = requests.post(
        f"{base}/labs/rachel/spawn",
        json={"options": {"image": stack.demo_image, "size": "small"}, "env": {}},
        headers=user,
        allow_redirects=False,
        timeout=10,
    )
    assert spawned.status_code == 303
    _wait(lambda: _running(base, admin))
    created = requests.post(
        f"{base}/labs/rachel/clusters",
        json={"kind": "daskclusters", "workers": 1, "max_workers": 3},
        headers=user,
        timeout=10,
    )
    assert created.status_code == 201, created.text
    name = created.json()["name"]
    cluster_url = f"{base}/labs/rachel/clusters/{name}"

    def cluster() -> dict[str, Any]:
        body: dict[str, Any] = requests.get(cluster_url, headers=user, timeout=5).json()
        return body

    _wait(lambda: cluster()["status"] == "running")
    before = cluster()

    pause = stack.kube.faults.pause_next("patch", "daskclusters", namespace=namespace)
    scale_url = f"{stack.spawner_url}/ddl_cluster_scaler/scale/daskclusters/{name}"
    answers: list[int] = []

    def scale() -> None:
        try:
            answers.append(
                requests.patch(
                    scale_url, json={"replicas": 3}, headers=user, timeout=30
                ).status_code
            )
        except requests.RequestException:
            answers.append(0)

    scaling = threading.Thread(target=scale)
    scaling.start()
    try:
        assert pause.arrived.wait(10)
        stack.restart_spawner(kill=True)
    finally:
        stack.kube.faults.cancel(pause)  # the API server goes on with the patch it had
    scaling.join(10)
    assert answers == [0]  # the caller never heard back

    def workers() -> int:
        return len(
            [
                p
                for p in stack.kube.store.list("pods", namespace)
                if p["metadata"]["labels"].get("dask.org/cluster-name") == name
                and p["metadata"]["labels"].get("dask.org/component") == "worker"
                and not p["metadata"].get("deletionTimestamp")
            ]
        )

    _wait(lambda: workers() == 3)
    mended = _wait(lambda: cluster()["workers"] == 3 and cluster())
    assert isinstance(mended, dict) and mended["status"] == "running"
    assert mended["usage"]["workers"] == 3
    assert mended["usage"]["cpu"] > before["usage"]["cpu"]

    # The next scale counts from what runs, once the killed request's hold on the budget
    # has lapsed (503 until then, for a few seconds).
    def scaled_down() -> requests.Response | None:
        answer = requests.patch(scale_url, json={"replicas": 1}, headers=user, timeout=30)
        if answer.status_code == 503:
            assert answer.json()["code"] == "dependency_unavailable"
            return None
        return answer

    again = _wait(scaled_down)
    assert isinstance(again, requests.Response) and again.status_code == 200, again
    assert again.json()["effective_replicas"] == 1
    # The operator takes the count into its worker group; retiring a worker needs a scheduler
    # that answers, which this stack's emulated pods do not run (tests/clusters/
    # test_real_dask_operator.py follows one on real processes).

    def group_replicas() -> Any:
        group = stack.kube.store.get("daskworkergroups", namespace, f"{name}-default") or {}
        return ((group.get("spec") or {}).get("worker") or {}).get("replicas")

    _wait(lambda: group_replicas() == 1)
    assert cluster()["usage"] == before["usage"]

    assert requests.delete(f"{base}/labs/rachel", headers=admin, timeout=5).status_code == 202
    _wait(lambda: stack.kube.store.get("namespaces", None, namespace) is None)

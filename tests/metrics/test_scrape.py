"""``/metrics`` of a replica with two web workers and its runner, after a scripted workload.

Spawns that complete, one failure of each reason the metrics name (an image that cannot be
pulled, a crash loop, a pod no node can take, a namespace quota, an API error, a deadline),
deletes and an event stream, all on the local stack; then the scrape, parsed with
``prometheus_client``'s own parser, must show exactly that, whichever worker answered it
and whichever worker did the work.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from app.builders.names import MANAGED_BY, MANAGED_BY_LABEL
from devstack.demo import add_load_users
from devstack.gafaelfawr import GroupSpec
from devstack.stack import REPO_ROOT, LocalStack, StackOptions
from tests.support.sse import SseEvent, parse_sse

SPAWN_TIMEOUT = 15
"""The stack's ``lab.spawnTimeout``: far above a spawn's few seconds here, and what the
deadline failure waits for."""

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

COMPLETED = ["mok1", "mok2", "mok3"]
FAILED = {
    "mpull": "image_pull",
    "mcrash": "crash",
    "msched": "unschedulable",
    "mquota": "quota",
    "mkube": "kubernetes_error",
    "mslow": "timeout",
}
DELETED = ["mok1", "mok2"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("metrics-stack"),
        workers=2,
        pull_seconds=0.2,
        config_overrides={"lab": {"spawnTimeout": SPAWN_TIMEOUT}},
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not true within {timeout} s: {predicate}")


class Script:
    """The workload's steps, through the service's HTTP API."""

    def __init__(self, stack: LocalStack, tokens: dict[str, str]) -> None:
        self.stack = stack
        self.tokens = tokens
        self.base = f"{stack.spawner_url}/spawner/v1"
        admin = stack.state()["tokens"]["admin"]["token"]
        self.admin = {"Authorization": f"Bearer {admin}"}

    def spawn(self, user: str, image: str) -> None:
        response = requests.post(
            f"{self.base}/labs/{user}/spawn",
            json={"options": {"image": image, "size": "small"}, "env": {}},
            headers={"Authorization": f"Bearer {self.tokens[user]}"},
            allow_redirects=False,
            timeout=30,
        )
        assert response.status_code == 303, response.text

    def status(self, user: str) -> dict[str, Any] | None:
        response = requests.get(f"{self.base}/labs/{user}", headers=self.admin, timeout=30)
        if response.status_code == 404:
            return None
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def wait_status(self, user: str, wanted: str) -> dict[str, Any]:
        def settled() -> dict[str, Any] | None:
            body = self.status(user)
            return body if body is not None and body["status"] in ("running", "failed") else None

        body: dict[str, Any] = wait_for(settled)
        assert body["status"] == wanted, body
        return body

    def delete(self, user: str) -> None:
        response = requests.delete(f"{self.base}/labs/{user}", headers=self.admin, timeout=30)
        assert response.status_code in (202, 204), response.text
        wait_for(lambda: self.status(user) is None)

    def unpulled_images(self) -> list[str] | None:
        """Images users are offered that are in no prepull set, so no node has them until a
        spawn pulls them (None until the digests are known)."""
        response = requests.get(f"{self.base}/images", headers=self.admin, timeout=30)
        assert response.status_code == 200, response.text
        found = []
        for config in response.json()["configs"]:
            prepulled = {image["digest"] for image in config["prepull"]}
            if not prepulled or None in prepulled:
                return None
            for kind, images in config["images"].items():
                for image in images:
                    if kind in ("alias", "unknown") or image["aliases"]:
                        continue
                    if image["digest"] and image["digest"] not in prepulled:
                        found.append(str(image["reference"]))
        return found if len(found) >= 3 else None

    def scrape(self) -> Samples:
        """The replica as the ServiceMonitor scrapes it, both containers' ports (web and
        runner), aggregated as the dashboard does: what is counted where it happens summed,
        what is read from Redis (the same in every answer) by its maximum."""
        replica = self.stack.replicas[0]
        samples: Samples = {}
        for url in (replica.url, replica.runner_url):
            # A new connection each time: any worker of each may answer.
            response = requests.get(f"{url}/metrics", headers={"Connection": "close"}, timeout=30)
            assert response.status_code == 200
            assert response.headers["Content-Type"].startswith("text/plain")
            for family in text_string_to_metric_families(response.text):
                for sample in family.samples:
                    key = sample.name, frozenset(sample.labels.items())
                    if family.name in READ_FROM_REDIS:
                        samples[key] = max(samples.get(key, sample.value), sample.value)
                    else:
                        samples[key] = samples.get(key, 0.0) + sample.value
        return samples


READ_FROM_REDIS = frozenset(
    f"lab_spawner_{name}"
    for name in (
        "workloads",
        "operations_in_progress",
        "operations_waiting",
        "image_records",
        "prepull_images",
        "prepull_nodes",
        "prepull_missing",
        "prepull_running",
    )
)
"""The state every answer reads from Redis alike (the metrics page: take ``max``)."""


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample's value (0 if absent, as Prometheus reads a counter never incremented)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of every sample of ``name`` with (at least) these labels."""
    wanted = set(labels.items())
    return sum(v for (n, found), v in samples.items() if n == name and wanted <= found)


DOCUMENTED = REPO_ROOT / "docs" / "admin" / "metrics.md"


def _documented_metrics() -> list[str]:
    """Every metric the metrics page lists, as its family is named (a counter without its
    ``_total``)."""
    names = re.findall(r"^\| `(lab_spawner_[a-z_]+)` \|", DOCUMENTED.read_text(), re.M)
    assert len(names) > 15
    return [name.removesuffix("_total") for name in names]


def test_a_fresh_replica_exports_every_documented_metric(stack: LocalStack) -> None:
    """Before anything has happened, the first scrape (this module's stack is new) already
    has every metric the page documents, failures and Redis errors at zero with their labels,
    so a rate or an alert has a series to read before the first failure."""
    script = Script(stack, {})
    replica = stack.replicas[0]
    families: set[str] = set()
    for url in (replica.url, replica.runner_url):
        # The pod's two answers together, as the ServiceMonitor scrapes them.
        requests.get(f"{url}/readyz", timeout=30)
        response = requests.get(f"{url}/metrics", timeout=30)
        families |= {f.name for f in text_string_to_metric_families(response.text)}
    missing = [name for name in _documented_metrics() if name not in families]
    assert missing == []
    samples = script.scrape()
    for kind in ("lab", "cluster", "kernel", "app"):
        for reason in ("image_pull", "crash", "unschedulable", "quota", "timeout"):
            labels = frozenset({"kind": kind, "action": "spawn", "reason": reason}.items())
            assert samples[("lab_spawner_operation_failures_total", labels)] == 0
    for error in ("connection", "timeout"):
        assert samples[("lab_spawner_redis_errors_total", frozenset({"error": error}.items()))] == 0
    leaders = {dict(labels)["loop"] for name, labels in samples if name == "lab_spawner_leader"}
    assert leaders == {"lab-watcher", "image-refresher", "prepuller"}


def test_scripted_workload_is_counted_exactly(stack: LocalStack) -> None:
    users = [*COMPLETED, *FAILED]
    tokens = add_load_users(
        stack.gafaelfawr, users, first_uid=6100, group=GroupSpec("metrics-users", 6099)
    )
    script = Script(stack, tokens)
    pull_fails, crashes, slow = wait_for(script.unpulled_images)[:3]

    # Spawns that complete, at once, through either worker.
    with ThreadPoolExecutor(len(COMPLETED)) as pool:
        list(pool.map(lambda user: script.spawn(user, stack.demo_image), COMPLETED))
    for user in COMPLETED:
        script.wait_status(user, "running")

    # One failure of each reason, in turn. The pod faults stay set: cleared, a failing pod
    # might come up after all.
    faults = stack.kube.cluster.faults
    faults.set("image_pull", f"{pull_fails}*", "manifest unknown")
    script.spawn("mpull", pull_fails)
    assert "cannot pull image" in script.wait_status("mpull", "failed")["error"]

    faults.set("crash_loop", f"{crashes}*")
    script.spawn("mcrash", crashes)
    assert "keeps crashing" in script.wait_status("mcrash", "failed")["error"]

    faults.set("unschedulable", "nublado-msched/*")
    script.spawn("msched", stack.demo_image)
    assert "cannot be scheduled" in script.wait_status("msched", "failed")["error"]

    # An administrator's quota, tighter than the size, in a namespace of the service's.
    namespace = "nublado-mquota"
    stack.kube.store.create(
        "namespaces", {"metadata": {"name": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY}}}
    )
    stack.kube.store.create(
        "resourcequotas",
        {
            "metadata": {"name": "admin-limit", "namespace": namespace},
            "spec": {"hard": {"limits.memory": "1Gi"}},
        },
    )
    script.spawn("mquota", stack.demo_image)
    assert "exceeded quota" in script.wait_status("mquota", "failed")["error"]

    # An answer no retry helps with.
    stack.kube.faults.fail(count=1, verb="create", resource="configmaps", code=422)
    script.spawn("mkube", stack.demo_image)
    assert "Kubernetes error" in script.wait_status("mkube", "failed")["error"]

    # A pull slower than the deadline, followed on its event stream meanwhile.
    stack.kube.cluster.settings.pull_seconds_by_image[f"{slow}*"] = 10 * SPAWN_TIMEOUT
    script.spawn("mslow", slow)
    received: list[SseEvent] = []
    opened = threading.Event()

    def follow() -> None:
        with requests.get(
            f"{script.base}/labs/mslow/events", headers=script.admin, stream=True, timeout=60
        ) as response:
            opened.set()
            for item in parse_sse(response.iter_content(None)):
                if isinstance(item, SseEvent):
                    received.append(item)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    assert opened.wait(30)
    during = wait_for(
        lambda: (s := script.scrape()) and value(s, "lab_spawner_event_streams_open") == 1 and s
    )
    assert value(during, "lab_spawner_operations_in_progress", kind="lab") == 1
    assert value(during, "lab_spawner_workloads", kind="lab", status="starting") == 1
    reader.join(SPAWN_TIMEOUT + 30)
    assert not reader.is_alive()
    assert received[-1].type == "failed"
    assert "did not finish within" in received[-1].data

    for user in DELETED:
        script.delete(user)

    # Every scrape, from whichever worker, reads the same.
    scrapes = [script.scrape() for _ in range(6)]
    for samples in scrapes:
        spawns = {
            outcome: value(
                samples, "lab_spawner_operations_total", kind="lab", action="spawn", outcome=outcome
            )
            for outcome in ("succeeded", "failed", "superseded")
        }
        assert spawns == {"succeeded": 3, "failed": 6, "superseded": 0}
        for reason in ("image_pull", "crash", "unschedulable", "quota", "kubernetes_error"):
            labels = {"kind": "lab", "action": "spawn", "reason": reason}
            assert value(samples, "lab_spawner_operation_failures_total", **labels) == 1, reason
        assert (
            value(
                samples,
                "lab_spawner_operation_failures_total",
                kind="lab",
                action="spawn",
                reason="timeout",
            )
            == 1
        )
        assert total(samples, "lab_spawner_operation_failures_total", kind="lab") == 6
        assert (
            value(
                samples,
                "lab_spawner_operations_total",
                kind="lab",
                action="delete",
                outcome="succeeded",
            )
            == 2
        )
        assert total(samples, "lab_spawner_operations_total", kind="lab", action="delete") == 2
        # The durations: one observation per operation, the deadline's at least its length.
        durations = "lab_spawner_operation_duration_seconds"
        spawn_failed = {"kind": "lab", "action": "spawn", "outcome": "failed"}
        assert value(samples, f"{durations}_count", **spawn_failed) == 6
        assert value(samples, f"{durations}_sum", **spawn_failed) >= SPAWN_TIMEOUT
        assert (
            value(samples, f"{durations}_count", kind="lab", action="spawn", outcome="succeeded")
            == 3
        )
        assert (
            value(samples, f"{durations}_count", kind="lab", action="delete", outcome="succeeded")
            == 2
        )
        # The state read from Redis.
        assert value(samples, "lab_spawner_workloads", kind="lab", status="running") == 1
        assert value(samples, "lab_spawner_workloads", kind="lab", status="failed") == 6
        assert total(samples, "lab_spawner_workloads", kind="lab") == 7
        assert value(samples, "lab_spawner_operations_in_progress", kind="lab") == 0
        # Every image record counted once by its state, once by its engine status.
        images = total(samples, "lab_spawner_image_records")
        assert images > 0
        assert images == total(samples, "lab_spawner_workloads", kind="image")
        assert value(samples, "lab_spawner_event_streams_open") == 0
        # Each elected loop led by exactly one of the two workers.
        for loop in ("lab-watcher", "image-refresher", "prepuller"):
            assert value(samples, "lab_spawner_leader", loop=loop) == 1, loop
        assert value(samples, "lab_spawner_prepull_nodes") == 3
        assert value(samples, "lab_spawner_prepull_images") >= 1
        # Calls out of the service were counted and timed.
        created_pods = total(
            samples, "lab_spawner_kubernetes_requests_total", verb="create", resource="pods"
        )
        # Every spawn but the quota's, refused, and the API error's, before it, made a pod.
        assert created_pods >= 7
        assert (
            value(
                samples,
                "lab_spawner_kubernetes_requests_total",
                verb="create",
                resource="configmaps",
                status="422",
            )
            == 1
        )
        assert total(samples, "lab_spawner_kubernetes_request_duration_seconds_count") > 0
        assert value(samples, "lab_spawner_redis_round_trips_total") > 0
        assert value(samples, "lab_spawner_redis_errors_total", error="connection") == 0
        assert value(samples, "lab_spawner_redis_errors_total", error="timeout") == 0
        # Every spawn was its user's first request with a new token: both answers asked of
        # Gafaelfawr (once across the workers, which share the cache in Redis); the
        # administrator's token, used for every status read, mostly found in memory.
        for answer in ("token_info", "user_info"):
            asked = {"answer": answer, "source": "gafaelfawr"}
            assert value(samples, "lab_spawner_gafaelfawr_lookups_total", **asked) >= len(users)
            assert value(
                samples, "lab_spawner_gafaelfawr_requests_total", answer=answer, status="200"
            ) == value(samples, "lab_spawner_gafaelfawr_lookups_total", **asked)
        memory = {"answer": "token_info", "source": "memory"}
        assert value(samples, "lab_spawner_gafaelfawr_lookups_total", **memory) > 0

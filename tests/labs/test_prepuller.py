"""The prepuller on an emulated cluster of several nodes, with images from the registry
emulator: eligibility, pulls, failures, new tags, new nodes, and the status route."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from app.extensions.labs import machinery_of
from app.storage.admin_feed import admin_feed_channel
from app.workloads.image.prepuller import PassReport
from devstack.demo import LAB_REPOSITORY, demo_registry, demo_tokens
from devstack.gafaelfawr import GafaelfawrEmulator
from devstack.kube import KubernetesEmulator
from devstack.kube.cluster import ClusterSettings
from devstack.registry import RegistryEmulator
from tests.conftest import bearer, service_config
from tests.labs.conftest import wait_for
from tests.support.redis_server import RedisServer

LAB_LABEL = {"lab-spawner.test/labs": "true"}
COMPONENT = "app.kubernetes.io/component"
PREPULLED = ("w_2024_42", "r26_0_0", "w_2024_44", "w_2024_43", "d_2024_11_05")


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryEmulator]:
    emulator = demo_registry().start()
    yield emulator
    emulator.stop()


@pytest.fixture
def cluster(registry: RegistryEmulator) -> Iterator[KubernetesEmulator]:
    """A fresh cluster: two lab nodes, and one each of tainted, unselected and cordoned."""
    settings = ClusterSettings(
        pull_seconds=0.3, image_digest_resolver=registry.digest_for_reference
    )
    emulator = KubernetesEmulator(settings=settings).start()
    emulator.cluster.add_node("lab-1", labels=LAB_LABEL)
    emulator.cluster.add_node("lab-2", labels=LAB_LABEL)
    emulator.cluster.add_node(
        "gpu-1",
        labels=LAB_LABEL,
        taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
    )
    emulator.cluster.add_node("infra-1", labels={"role": "infra"})
    emulator.cluster.add_node("lab-3", labels=LAB_LABEL, unschedulable=True)
    emulator.store.create("namespaces", {"metadata": {"name": "nublado"}})
    yield emulator
    emulator.stop()


@pytest.fixture
def prepull_raw_config(
    redis_client: Any,
    redis_server: RedisServer,
    gafaelfawr: GafaelfawrEmulator,
    cluster: KubernetesEmulator,
    registry: RegistryEmulator,
) -> dict[str, Any]:
    raw = service_config(redis_server.url, gafaelfawr.url, cluster.url)
    raw["prepull"] = [
        {
            "name": "jupyter",
            "type": "rubin",
            "registry": registry.host,
            "docker": {"repository": LAB_REPOSITORY},
            "recommendedTag": "recommended",
            "numReleases": 1,
            "numWeeklies": 2,
            "numDailies": 1,
            "aliasTags": ["latest", "latest_weekly", "latest_daily", "latest_release"],
        }
    ]
    raw["images"] = {"refreshSeconds": 3600}
    raw["lab"]["nodeSelector"] = LAB_LABEL
    raw["prepuller"] = {
        "enabled": True,
        "intervalSeconds": 0.1,
        "leaseSeconds": 2,
        "pullsPerNode": 2,
        "maxPulls": 3,
        "retrySeconds": 0.3,
    }
    return raw


@pytest.fixture
def prepull_app(prepull_raw_config: dict[str, Any], make_app: Callable[[Config], Flask]) -> Flask:
    app = make_app(parse_config(prepull_raw_config))
    machinery_of(app).images.refresh_all()
    return app


@pytest.fixture
def admin_client(prepull_app: Flask, tokens: dict[str, str]) -> Callable[[str], Any]:
    client = prepull_app.test_client()

    def get(path: str) -> Any:
        response = client.get(f"/spawner/v1{path}", headers=bearer(tokens["admin"]))
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_json()

    return get


def _admin_token() -> str:
    return demo_tokens()["admin"].token


def _ref(registry: RegistryEmulator, tag: str) -> str:
    return f"{registry.host}/{LAB_REPOSITORY}:{tag}"


def _status(get: Callable[[str], Any]) -> Any:
    return get("/prepulls")


def _all_prepulled(get: Callable[[str], Any]) -> Any:
    status = _status(get)
    images = status["configs"][0]["images"]
    # Before the first refresh a pass sees no images at all: that is not "all prepulled".
    done = status["updated"] and images["prepulled"] and not images["pending"]
    return status if done else None


def _prepull_pods(cluster: KubernetesEmulator) -> list[dict[str, Any]]:
    return [
        pod
        for pod in cluster.store.list("pods", "nublado")
        if pod["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "prepull"
    ]


def _cached_tags(cluster: KubernetesEmulator, registry: RegistryEmulator, node: str) -> set[str]:
    """The demo tags whose image (by digest) the node reports in ``status.images``."""
    found = cluster.store.get("nodes", None, node)
    assert found is not None
    names = [n for entry in found["status"].get("images", []) for n in entry["names"]]
    digests = {n.split("@", 1)[1] for n in names if "@" in n}
    tags = [*PREPULLED, "w_2024_45"] if "w_2024_45" in registry.tags(LAB_REPOSITORY) else PREPULLED
    return {tag for tag in tags if registry.digest(LAB_REPOSITORY, tag) in digests}


def test_a_fresh_cluster_gets_the_prepull_set_on_every_eligible_node(
    admin_client: Callable[[str], Any], cluster: KubernetesEmulator, registry: RegistryEmulator
) -> None:
    expected = {_ref(registry, t) for t in PREPULLED}

    def all_pending() -> bool:
        pending = _status(admin_client)["configs"][0]["images"]["pending"]
        return {entry["url"] for entry in pending} == expected

    # Pulls take 0.3 s, so passes see every image pending before any is everywhere.
    wait_for(all_pending)

    status = wait_for(lambda: _all_prepulled(admin_client), timeout=30)
    config = status["configs"][0]
    assert config["name"] == "jupyter" and config["recommendedTag"] == "recommended"
    prepulled = config["images"]["prepulled"]
    assert [entry["url"] for entry in prepulled] == [_ref(registry, t) for t in PREPULLED]
    for entry in prepulled:
        assert entry["nodes"] == ["lab-1", "lab-2"]
        assert entry["hash"] == registry.digest(LAB_REPOSITORY, entry["url"].rsplit(":", 1)[1])
    other = {entry["url"] for entry in config["images"]["other"]}
    assert _ref(registry, "r26_0_0_rc1") in other and _ref(registry, "w_2024_42") not in other

    nodes = {node["name"]: node for node in status["nodes"]}
    assert nodes["lab-1"]["eligible"] and "comment" not in nodes["lab-1"]
    assert "taint dedicated=gpu:NoSchedule" in nodes["gpu-1"]["comment"]
    assert "lab-spawner.test/labs=true" in nodes["infra-1"]["comment"]
    assert "cordoned" in nodes["lab-3"]["comment"]
    assert not any(nodes[n]["eligible"] for n in ("gpu-1", "infra-1", "lab-3"))
    for name in ("lab-1", "lab-2"):
        assert set(PREPULLED) <= _cached_tags(cluster, registry, name)
        assert any(_ref(registry, "w_2024_42") in c for c in nodes[name]["cached"])
    for name in ("gpu-1", "infra-1", "lab-3"):
        assert not _cached_tags(cluster, registry, name)
    # Every pull pod is cleaned up once its image is there.
    wait_for(lambda: not _prepull_pods(cluster))


def test_pulls_stay_within_their_bounds(
    cluster: KubernetesEmulator, prepull_raw_config: dict[str, Any], make_app: Callable[..., Flask]
) -> None:
    live: dict[str, str] = {}
    peaks = {"total": 0, "node": 0}
    nodes_used: set[str] = set()

    def observe(kind: str, resource: str, obj: dict[str, Any]) -> None:
        """Every committed pod change, as it happens: the live pulls at each moment."""
        meta = obj["metadata"]
        if resource != "pods" or meta.get("labels", {}).get(COMPONENT) != "prepull":
            return
        if kind == "DELETED" or meta.get("deletionTimestamp"):
            live.pop(meta["name"], None)
        else:
            live[meta["name"]] = obj["spec"]["nodeName"]
            nodes_used.add(obj["spec"]["nodeName"])
            assert obj["spec"]["automountServiceAccountToken"] is False
        per_node = [list(live.values()).count(n) for n in set(live.values())]
        peaks["total"] = max(peaks["total"], len(live))
        peaks["node"] = max([peaks["node"], *per_node])

    unsubscribe = cluster.store.subscribe(observe)
    try:
        app = make_app(parse_config(prepull_raw_config))
        machinery_of(app).images.refresh_all()
        client = app.test_client()

        def done() -> Any:
            status = client.get("/spawner/v1/prepulls", headers=bearer(_admin_token())).get_json()
            images = status["configs"][0]["images"]
            return status["updated"] and images["prepulled"] and not images["pending"]

        wait_for(done, timeout=30)
    finally:
        unsubscribe()
    assert nodes_used == {"lab-1", "lab-2"}
    assert peaks["total"] == 3  # maxPulls, reached: two nodes lack five images each
    assert peaks["node"] == 2  # pullsPerNode: lab-1's five images shared by two pods


def test_a_pull_failing_on_one_node_is_reported_and_blocks_nothing_else(
    admin_client: Callable[[str], Any],
    prepull_app: Flask,
    cluster: KubernetesEmulator,
    registry: RegistryEmulator,
) -> None:
    bad = _ref(registry, "d_2024_11_05")
    cluster.cluster.faults.set("image_pull", f"{bad}*", "disk pressure on lab-2", node="lab-2")

    def reported() -> Any:
        status = _status(admin_client)
        images = status["configs"][0]["images"]
        done = {e["url"] for e in images["prepulled"]}
        pending = {e["url"]: e for e in images["pending"]}
        if done != {_ref(registry, t) for t in PREPULLED if t != "d_2024_11_05"}:
            return None
        entry = pending.get(bad)
        if entry is None or not entry["failures"] or entry["failures"][0]["attempts"] < 2:
            return None
        return entry

    entry = wait_for(reported, timeout=30)
    assert entry["nodes"] == ["lab-1"] and entry["missing"] == ["lab-2"]
    failure = entry["failures"][0]
    assert failure["node"] == "lab-2" and "disk pressure on lab-2" in failure["reason"]
    assert failure["retry"].endswith("Z")

    # Healed, the retry succeeds and the failure is forgotten.
    cluster.cluster.faults.clear("image_pull")
    wait_for(lambda: _all_prepulled(admin_client), timeout=30)
    wait_for(lambda: not _prepull_pods(cluster))


def test_a_new_weekly_is_prepulled_and_then_offered_in_the_form(
    prepull_app: Flask,
    admin_client: Callable[[str], Any],
    cluster: KubernetesEmulator,
    registry: RegistryEmulator,
    gafaelfawr: GafaelfawrEmulator,
    tokens: dict[str, str],
) -> None:
    wait_for(lambda: _all_prepulled(admin_client), timeout=30)
    cluster.cluster.settings.pull_seconds_by_image["*:w_2024_45*"] = 1.0
    registry.add_tag(LAB_REPOSITORY, "w_2024_45", f"{LAB_REPOSITORY}:w_2024_45")
    try:
        machinery_of(prepull_app).images.refresh_all()
        client: FlaskClient = prepull_app.test_client()

        def radios() -> str:
            response = client.get("/spawner/v1/spawn-form/rachel", headers=bearer(tokens["rachel"]))
            assert response.status_code == 200
            return response.get_data(as_text=True).split("<select")[0]

        new = _ref(registry, "w_2024_45")

        def pending() -> bool:
            entries = _status(admin_client)["configs"][0]["images"]["pending"]
            return any(e["url"] == new for e in entries)

        # Its pull takes a second: while pending, the form keeps it out of the radio list
        # (choosing it would mean waiting for a pull).
        wait_for(pending, timeout=10)
        assert new not in radios()

        def everywhere() -> bool:
            status = _all_prepulled(admin_client)
            prepulled = status["configs"][0]["images"]["prepulled"] if status else []
            return any(e["url"] == new for e in prepulled)

        wait_for(everywhere, timeout=30)
        text = radios()
        assert new in text
        assert text.index(_ref(registry, "w_2024_42")) < text.index(new)  # recommended first
        assert {"w_2024_45"} <= _cached_tags(cluster, registry, "lab-1")
    finally:
        registry.remove_tag(LAB_REPOSITORY, "w_2024_45")


def test_a_node_added_later_is_filled(
    admin_client: Callable[[str], Any], cluster: KubernetesEmulator, registry: RegistryEmulator
) -> None:
    wait_for(lambda: _all_prepulled(admin_client), timeout=30)
    cluster.cluster.add_node("lab-4", labels=LAB_LABEL)

    def filled() -> Any:
        status = _all_prepulled(admin_client)
        if status is None:
            return None
        entries = status["configs"][0]["images"]["prepulled"]
        return all("lab-4" in e["nodes"] for e in entries) and status

    wait_for(filled, timeout=30)
    assert set(PREPULLED) <= _cached_tags(cluster, registry, "lab-4")
    wait_for(lambda: not _prepull_pods(cluster))


def test_pods_of_a_previous_leader_are_adopted_or_removed(
    prepull_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    cluster: KubernetesEmulator,
) -> None:
    from app.workloads.image.builders import build_pull_pod

    config = parse_config(prepull_raw_config)
    # A pull the previous leader started for an image nobody wants any more.
    stray = build_pull_pod(["registry.test/old/image:gone"], "lab-1", config)
    cluster.store.create("pods", stray)
    app = make_app(config)
    machinery_of(app).images.refresh_all()
    wait_for(
        lambda: all(
            p["metadata"]["name"] != stray["metadata"]["name"] for p in _prepull_pods(cluster)
        ),
        timeout=20,
    )


def test_status_route_is_for_administrators(prepull_app: Flask, tokens: dict[str, str]) -> None:
    client = prepull_app.test_client()
    response = client.get("/spawner/v1/prepulls", headers=bearer(tokens["rachel"]))
    assert response.status_code == 403


def test_status_before_any_pass_lists_everything_pending(
    prepull_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    tokens: dict[str, str],
    registry: RegistryEmulator,
) -> None:
    prepull_raw_config["prepuller"]["enabled"] = False
    app = make_app(parse_config(prepull_raw_config))
    machinery_of(app).images.refresh_all()
    body = app.test_client().get("/spawner/v1/prepulls", headers=bearer(tokens["admin"])).get_json()
    assert body["updated"] is None and body["nodes"] == []
    pending = body["configs"][0]["images"]["pending"]
    assert [e["url"] for e in pending] == [_ref(registry, t) for t in PREPULLED]


def test_the_administrators_feed_hears_of_every_pull(
    prepull_raw_config: dict[str, Any],
    make_app: Callable[..., Flask],
    redis_client: Any,
) -> None:
    config = parse_config(prepull_raw_config)
    listener = redis_client.pubsub()
    listener.subscribe(admin_feed_channel(config.redis.key_prefix))
    try:
        app = make_app(config)
        machinery_of(app).images.refresh_all()
        client = app.test_client()

        def get(path: str) -> Any:
            return client.get(f"/spawner/v1{path}", headers=bearer(_admin_token())).get_json()

        wait_for(lambda: _all_prepulled(get), timeout=30)
        news = []
        while (message := listener.get_message(timeout=0.5)) is not None:
            if message["type"] == "message":
                news.append(json.loads(message["data"]))
    finally:
        listener.close()
    passes = [n["data"] for n in news if n["type"] == "prepull"]
    # Five images on each of the two eligible nodes: every pull started and finished.
    assert sum(p["started"] for p in passes) == 10
    assert sum(p["finished"] for p in passes) == 10
    assert sum(p["failed"] for p in passes) == 0
    assert passes[-1]["missing"] == 0 and passes[-1]["nodes"] == 2


def test_an_image_a_pull_pod_reports_done_is_not_pulled_again_before_its_node_says_so(
    prepull_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    cluster: KubernetesEmulator,
) -> None:
    """A node's image list lags behind the pull pods (a kubelet reports it every few seconds,
    and a pass lists nodes before pods): what a pod says it pulled counts as there."""
    prepull_raw_config["prepuller"]["enabled"] = False  # the passes are this test's own
    app = make_app(parse_config(prepull_raw_config))
    machinery_of(app).images.refresh_all()
    prepuller = machinery_of(app).prepuller

    def first_pass() -> PassReport | None:
        # An image is prepulled once validated, which the app's runner does after the
        # refresh: a pass before then has fewer images to pull.
        report = prepuller.run_pass()
        return report if report.images == len(PREPULLED) else None

    first = wait_for(first_pass, timeout=30)
    assert first.started

    def pods_done() -> bool:
        pods = _prepull_pods(cluster)
        return bool(pods) and all(p["status"].get("phase") == "Succeeded" for p in pods)

    wait_for(pods_done, timeout=30)
    pulled = {image for image, node in first.started if node == "lab-1"}
    # lab-1's kubelet has not reported them yet.
    node = cluster.store.get("nodes", None, "lab-1")
    assert node is not None
    node["status"]["images"] = [
        entry
        for entry in node["status"]["images"]
        if not any(name.split("@")[0] in pulled or name in pulled for name in entry["names"])
    ]
    cluster.store.update("nodes", node)

    second = prepuller.run_pass()
    assert {image for image, node in second.finished if node == "lab-1"} == pulled
    assert [(image, node) for image, node in second.started if node == "lab-1"] == []

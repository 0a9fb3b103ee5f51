"""Watches: order, resume, initial state, selectors, timeouts, expiry and fan-out."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import kubernetes.watch
import pytest
import requests
from kubernetes.client import CoreV1Api

from devstack.kube import KubernetesEmulator
from devstack.kube.resources import ResourceRegistry
from devstack.kube.store import Change, Store
from devstack.kube.watches import Watcher, WatchHub


class RawWatch:
    """A watch read line by line over plain HTTP, to see exactly what the server sends."""

    def __init__(self, emulator: KubernetesEmulator, path: str, **params: Any) -> None:
        params.setdefault("labelSelector", MINE)
        self.response = requests.get(
            emulator.url + path, params={"watch": "true", **params}, stream=True, timeout=10
        )
        assert self.response.status_code == 200
        self._lines: Iterator[bytes] = self.response.iter_lines(chunk_size=1)

    def next(self) -> dict[str, Any]:
        for line in self._lines:
            if line:
                event: dict[str, Any] = json.loads(line)
                return event
        raise AssertionError("the watch ended")

    def take(self, count: int) -> list[tuple[str, str]]:
        events = [self.next() for _ in range(count)]
        return [(e["type"], e["object"]["metadata"]["name"]) for e in events]

    def rest(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self._lines if line]

    def close(self) -> None:
        self.response.close()


def _cm(name: str, **labels: str) -> dict[str, Any]:
    # Every object here is labelled, so watches can ignore what the simulated cluster adds
    # to a namespace on its own (its default ServiceAccount, the root CA ConfigMap).
    return {"metadata": {"name": name, "labels": {"suite": "watch", **labels}}}


MINE = "suite=watch"


CONFIGMAPS = "/api/v1/namespaces/test/configmaps"


def test_resume_from_list_version_sees_every_change_in_order(
    core_v1: CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_config_map(namespace, _cm("before"))
    version = core_v1.list_namespaced_config_map(namespace).metadata.resource_version
    core_v1.create_namespaced_config_map(namespace, _cm("a"))
    core_v1.patch_namespaced_config_map("a", namespace, {"data": {"k": "v"}})
    core_v1.create_namespaced_config_map(namespace, _cm("b"))
    core_v1.delete_namespaced_config_map("a", namespace)

    watch = kubernetes.watch.Watch()
    seen = []
    for event in watch.stream(
        core_v1.list_namespaced_config_map,
        namespace,
        resource_version=version,
        label_selector=MINE,
        timeout_seconds=5,
    ):
        seen.append(event)
        if len(seen) == 4:
            watch.stop()
    assert [(e["type"], e["object"].metadata.name) for e in seen] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    assert isinstance(seen[0]["object"], kubernetes.client.V1ConfigMap)
    versions = [int(e["object"].metadata.resource_version) for e in seen]
    assert versions == sorted(versions) and len(set(versions)) == 4
    assert versions[0] > int(version)


def test_resuming_from_any_version_replays_exactly_what_came_after() -> None:
    """Writers on several threads, and a listener writing as the emulator's controllers
    do (a deleted ConfigMap takes its Secret along), fill the history; a watch resumed
    from any version in it gets every change after that version, in commit order, and
    nothing before: the hub reads its history back only to the resumed version."""
    store = Store()
    hub = WatchHub(store, 10_000, ResourceRegistry())

    def cascade(change: Change) -> None:
        if change.type == "DELETED" and change.resource == "configmaps":
            meta = change.object["metadata"]
            store.delete("secrets", meta["namespace"], meta["name"])

    store.subscribe_changes(cascade)

    def write(thread: int) -> None:
        for i in range(40):
            meta = {"name": f"t{thread}-{i}", "namespace": "ns"}
            store.create("configmaps", {"metadata": meta})
            store.create("secrets", {"metadata": meta})
            if i % 3 == 0:
                store.delete("configmaps", "ns", meta["name"])

    writers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()

    def replay(resource: str, since: int) -> list[int]:
        watcher = Watcher(resource, "ns", lambda obj: True)
        hub.open(watcher, since, [])
        hub.remove(watcher)
        versions = []
        while True:
            try:
                versions.append(watcher.queue.get_nowait().change.resource_version)
            except queue.Empty:
                return versions

    newest = int(store.resource_version)
    everything = {resource: replay(resource, 0) for resource in ("configmaps", "secrets")}
    assert len(everything["configmaps"]) == 4 * (40 + 14)
    assert len(everything["secrets"]) == 4 * (40 + 14)
    for resource, versions in everything.items():
        assert versions == sorted(versions)
        for since in range(0, newest + 1, 7):
            assert replay(resource, since) == [v for v in versions if v > since], since
    hub.close()


def test_watch_without_version_starts_with_current_objects(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_config_map(namespace, _cm("one", app="x"))
    core_v1.create_namespaced_config_map(namespace, _cm("two", app="x"))
    watch = RawWatch(emulator, CONFIGMAPS, labelSelector="app=x", timeoutSeconds=5)
    assert sorted(watch.take(2)) == [("ADDED", "one"), ("ADDED", "two")]
    core_v1.create_namespaced_config_map(namespace, _cm("three", app="x"))
    assert watch.take(1) == [("ADDED", "three")]
    watch.close()


def test_watch_from_zero_is_like_no_version(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_config_map(namespace, _cm("exists", app="z"))
    watch = RawWatch(
        emulator, CONFIGMAPS, resourceVersion="0", labelSelector="app=z", timeoutSeconds=5
    )
    assert watch.take(1) == [("ADDED", "exists")]
    watch.close()


def test_live_events_in_commit_order(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str
) -> None:
    version = core_v1.list_namespaced_config_map(namespace).metadata.resource_version
    watch = RawWatch(emulator, CONFIGMAPS, resourceVersion=version, timeoutSeconds=10)
    for i in range(20):
        core_v1.create_namespaced_config_map(namespace, _cm(f"cm-{i:02d}"))
    assert watch.take(20) == [("ADDED", f"cm-{i:02d}") for i in range(20)]
    watch.close()


def test_timeout_seconds_ends_the_stream(emulator: KubernetesEmulator, namespace: str) -> None:
    start = time.monotonic()
    watch = RawWatch(emulator, CONFIGMAPS, resourceVersion="1", timeoutSeconds=1)
    assert watch.rest() == []
    elapsed = time.monotonic() - start
    assert 0.9 <= elapsed < 3


def test_client_watch_with_timeout_returns(core_v1: CoreV1Api, namespace: str) -> None:
    start = time.monotonic()
    events = list(
        kubernetes.watch.Watch().stream(core_v1.list_namespaced_pod, namespace, timeout_seconds=1)
    )
    assert events == []
    assert time.monotonic() - start < 3


def test_many_concurrent_watchers_see_the_same_sequence(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str
) -> None:
    version = core_v1.list_namespaced_config_map(namespace).metadata.resource_version
    watchers = [
        RawWatch(emulator, CONFIGMAPS, resourceVersion=version, timeoutSeconds=10)
        for _ in range(25)
    ]
    assert emulator.open_watches == 25
    for i in range(10):
        core_v1.create_namespaced_config_map(namespace, _cm(f"w{i}"))
        core_v1.patch_namespaced_config_map(f"w{i}", namespace, {"data": {"i": str(i)}})
    expected = [(kind, f"w{i}") for i in range(10) for kind in ("ADDED", "MODIFIED")]
    for watcher in watchers:
        assert watcher.take(20) == expected
        watcher.close()


@pytest.mark.watch_history(5)
def test_expired_version_gives_410_event(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str
) -> None:
    first = core_v1.create_namespaced_config_map(namespace, _cm("first")).metadata.resource_version
    for i in range(10):
        core_v1.create_namespaced_config_map(namespace, _cm(f"filler-{i}"))
    watch = RawWatch(emulator, CONFIGMAPS, resourceVersion=first, timeoutSeconds=5)
    events = watch.rest()
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"
    # a recent version is still served
    recent = core_v1.list_namespaced_config_map(namespace).metadata.resource_version
    live = RawWatch(emulator, CONFIGMAPS, resourceVersion=recent, timeoutSeconds=5)
    core_v1.create_namespaced_config_map(namespace, _cm("later"))
    assert live.take(1) == [("ADDED", "later")]
    live.close()


@pytest.mark.watch_history(5)
def test_client_watch_raises_410_for_expired_version(core_v1: CoreV1Api, namespace: str) -> None:
    first = core_v1.create_namespaced_config_map(namespace, _cm("first")).metadata.resource_version
    for i in range(10):
        core_v1.create_namespaced_config_map(namespace, _cm(f"filler-{i}"))
    with pytest.raises(kubernetes.client.ApiException) as caught:
        for _ in kubernetes.watch.Watch().stream(
            core_v1.list_namespaced_config_map, namespace, resource_version=first, timeout_seconds=5
        ):
            pass
    assert caught.value.status == 410


def test_label_selector_watch_reports_objects_leaving_and_entering(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str
) -> None:
    version = core_v1.list_namespaced_config_map(namespace).metadata.resource_version
    watch = RawWatch(
        emulator, CONFIGMAPS, resourceVersion=version, labelSelector="team=a", timeoutSeconds=10
    )
    core_v1.create_namespaced_config_map(namespace, _cm("one", team="a"))
    core_v1.create_namespaced_config_map(namespace, _cm("two", team="b"))
    core_v1.patch_namespaced_config_map("one", namespace, {"metadata": {"labels": {"team": "b"}}})
    core_v1.patch_namespaced_config_map("two", namespace, {"metadata": {"labels": {"team": "a"}}})
    core_v1.patch_namespaced_config_map("one", namespace, {"data": {"ignored": "yes"}})
    core_v1.patch_namespaced_config_map("two", namespace, {"data": {"seen": "yes"}})
    assert watch.take(4) == [
        ("ADDED", "one"),
        ("DELETED", "one"),
        ("ADDED", "two"),
        ("MODIFIED", "two"),
    ]
    watch.close()


def test_field_selector_watch(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str
) -> None:
    version = core_v1.list_namespaced_config_map(namespace).metadata.resource_version
    watch = RawWatch(
        emulator,
        CONFIGMAPS,
        resourceVersion=version,
        fieldSelector="metadata.name=wanted",
        timeoutSeconds=10,
    )
    core_v1.create_namespaced_config_map(namespace, _cm("unwanted"))
    core_v1.create_namespaced_config_map(namespace, _cm("wanted"))
    assert watch.take(1) == [("ADDED", "wanted")]
    watch.close()


def test_namespaced_and_cluster_wide_watches(
    emulator: KubernetesEmulator, core_v1: CoreV1Api
) -> None:
    for ns in ("left", "right"):
        core_v1.create_namespace({"metadata": {"name": ns}})
    version = core_v1.list_config_map_for_all_namespaces().metadata.resource_version
    only_left = RawWatch(
        emulator, "/api/v1/namespaces/left/configmaps", resourceVersion=version, timeoutSeconds=10
    )
    everywhere = RawWatch(
        emulator,
        "/api/v1/configmaps",
        resourceVersion=version,
        labelSelector="t",
        timeoutSeconds=10,
    )
    core_v1.create_namespaced_config_map("right", _cm("r", t="1"))
    core_v1.create_namespaced_config_map("left", _cm("l", t="1"))
    assert only_left.take(1) == [("ADDED", "l")]
    assert everywhere.take(2) == [("ADDED", "r"), ("ADDED", "l")]
    only_left.close()
    everywhere.close()


def test_cluster_writes_appear_in_watches(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str
) -> None:
    version = core_v1.list_namespaced_config_map(namespace).metadata.resource_version
    watch = RawWatch(
        emulator,
        CONFIGMAPS,
        resourceVersion=version,
        fieldSelector="metadata.name=direct",
        timeoutSeconds=10,
    )
    emulator.store.create(
        "configmaps", {"metadata": {**_cm("direct")["metadata"], "namespace": namespace}}
    )
    event = watch.next()
    assert event["type"] == "ADDED"
    assert event["object"]["kind"] == "ConfigMap" and event["object"]["apiVersion"] == "v1"
    watch.close()


def test_client_watch_stream_of_pods(
    emulator: KubernetesEmulator, core_v1: CoreV1Api, namespace: str
) -> None:
    emulator.cluster.add_node("worker")
    version = core_v1.list_namespaced_pod(namespace).metadata.resource_version
    body = {"metadata": {"name": "lab"}, "spec": {"containers": [{"name": "c", "image": "lab:1"}]}}
    core_v1.create_namespaced_pod(namespace, body)
    watch = kubernetes.watch.Watch()
    phases = []
    for event in watch.stream(
        core_v1.list_namespaced_pod, namespace, resource_version=version, timeout_seconds=10
    ):
        pod = event["object"]
        assert isinstance(pod, kubernetes.client.V1Pod)
        phases.append(pod.status.phase)
        if pod.status.phase == "Running":
            watch.stop()
    assert phases[0] == "Pending" and phases[-1] == "Running"


def test_bad_watch_parameters_are_400(emulator: KubernetesEmulator, namespace: str) -> None:
    response = requests.get(
        emulator.url + CONFIGMAPS, params={"watch": "1", "resourceVersion": "abc"}, timeout=5
    )
    assert response.status_code == 400
    response = requests.get(
        emulator.url + CONFIGMAPS, params={"watch": "1", "labelSelector": "a in b"}, timeout=5
    )
    assert response.status_code == 400


def test_closed_client_releases_its_watch(
    emulator: KubernetesEmulator, namespace: str, wait_until: Any
) -> None:
    watch = RawWatch(emulator, CONFIGMAPS, resourceVersion="1")
    assert emulator.open_watches == 1
    watch.close()
    wait_until(lambda: emulator.open_watches == 0, timeout=5)

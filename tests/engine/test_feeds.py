"""The shared watch operations follow their objects on (``app.engine.feeds``), against the
emulated API server over TLS. ConfigMaps stand in for pods: the feed is the same for any
resource, and nothing in the emulated cluster changes a ConfigMap but the test."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.config import KubernetesConfig
from app.engine import feeds
from app.engine.feeds import FeedRestarted, Follower, WatchFeed
from app.storage.kubernetes import KubernetesConnection, KubernetesStorage
from devstack.kube import KubernetesEmulator
from devstack.tls import shared_authority
from tests.labs.conftest import wait_for

SELECTOR = "feed-test=yes"
_namespaces = itertools.count()


@pytest.fixture
def storage(kube: KubernetesEmulator) -> KubernetesStorage:
    config = KubernetesConfig(
        mode="host",
        host=kube.url,
        kubeconfig=None,
        request_timeout=5.0,
        service_namespace="nublado",
        certificate_authority=str(shared_authority().ca_path),
    )
    return KubernetesStorage(connection=KubernetesConnection.from_config(config))


@pytest.fixture
def namespace(kube: KubernetesEmulator) -> Iterator[str]:
    name = f"feed-test-{next(_namespaces)}"
    kube.store.create("namespaces", {"metadata": {"name": name}})
    yield name
    for item in kube.store.list("configmaps", name):
        kube.store.delete("configmaps", name, item["metadata"]["name"])


@pytest.fixture
def feed(storage: KubernetesStorage) -> Iterator[WatchFeed]:
    made = WatchFeed(storage, "configmaps", SELECTOR, watch_seconds=2)
    yield made
    made.stop()


def make_map(kube: KubernetesEmulator, namespace: str, name: str) -> None:
    kube.store.create(
        "configmaps",
        {
            "metadata": {"name": name, "namespace": namespace, "labels": {"feed-test": "yes"}},
            "data": {"n": "0"},
        },
    )


def change_map(kube: KubernetesEmulator, namespace: str, name: str, value: str) -> None:
    current = kube.store.get("configmaps", namespace, name)
    assert current is not None
    kube.store.update("configmaps", {**current, "data": {"n": value}})


def next_change(follower: Follower, timeout: float = 10.0) -> tuple[str, dict[str, Any]]:
    """The follower's next change, reading again (here: nothing to read) when told to."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for change in follower.changes(None, 1):
                return change
        except FeedRestarted:
            continue
    raise AssertionError("no change reached the follower")


def assert_told_to_read_again(follower: Follower) -> None:
    """The follower's next wait ends with ``FeedRestarted``, within its second."""
    with pytest.raises(FeedRestarted):
        list(follower.changes(None, 1))


def settle(feed: WatchFeed, follower: Follower) -> None:
    """Return once the follower's read belongs to the feed's current watch: after the
    ``FeedRestarted`` of a follower that subscribed before the feed watched."""
    wait_for(lambda: feed.watching, timeout=20)
    with contextlib.suppress(FeedRestarted):
        list(follower.changes(None, 0))


def test_every_follower_gets_its_own_objects_changes_from_one_watch(
    kube: KubernetesEmulator, namespace: str, feed: WatchFeed
) -> None:
    names = [f"map-{i}" for i in range(12)]
    for name in names:
        make_map(kube, namespace, name)
    with contextlib.ExitStack() as stack:
        followers = {name: stack.enter_context(feed.follow(namespace, name)) for name in names}
        assert feed.following == len(names)
        for follower in followers.values():
            settle(feed, follower)
        for name in names:
            change_map(kube, namespace, name, f"{name}-changed")
        for name, follower in followers.items():
            change, obj = next_change(follower)
            assert (change, obj["metadata"]["name"], obj["data"]["n"]) == (
                "MODIFIED",
                name,
                f"{name}-changed",
            )
        assert feed.watch_requests == 1
    assert feed.following == 0


def test_a_follower_that_came_before_the_watch_is_told_to_read_again(
    kube: KubernetesEmulator, namespace: str, feed: WatchFeed
) -> None:
    make_map(kube, namespace, "early")
    with feed.follow(namespace, "early") as follower:
        # Subscribed while the feed had not started: a read made now may predate it.
        wait_for(lambda: feed.watching, timeout=20)
        assert_told_to_read_again(follower)
        # Read again: from here on, changes come.
        change_map(kube, namespace, "early", "1")
        assert next_change(follower)[1]["data"]["n"] == "1"


def test_a_dropped_watch_resumes_where_it_was_and_no_one_reads_again(
    kube: KubernetesEmulator, namespace: str, feed: WatchFeed
) -> None:
    make_map(kube, namespace, "steady")
    with feed.follow(namespace, "steady") as follower:
        settle(feed, follower)
        change_map(kube, namespace, "steady", "before")
        assert next_change(follower)[1]["data"]["n"] == "before"
        requests = feed.watch_requests
        assert kube.faults.drop_watches() >= 1
        change_map(kube, namespace, "steady", "after")
        # Delivered from the resumed watch, without a FeedRestarted on the way.
        changes = list(_changes_without_restart(follower, until="after"))
        assert changes[-1] == "after"
        assert feed.watch_requests > requests


def _changes_without_restart(follower: Follower, until: str) -> Iterator[str]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for _, obj in follower.changes(None, 1):
            yield obj["data"]["n"]
            if obj["data"]["n"] == until:
                return
    raise AssertionError(f"{until} never came")


def test_an_expired_watch_starts_over_and_followers_read_again(
    kube: KubernetesEmulator, namespace: str, feed: WatchFeed
) -> None:
    make_map(kube, namespace, "expiring")
    with feed.follow(namespace, "expiring") as follower:
        settle(feed, follower)
        kube.faults.fail(count=1, verb="watch", resource="configmaps", code=410)
        try:
            kube.faults.drop_watches()
            with pytest.raises(FeedRestarted):
                for _ in range(10):
                    list(follower.changes(None, 1))
        finally:
            kube.faults.clear()
        change_map(kube, namespace, "expiring", "later")
        assert next_change(follower)[1]["data"]["n"] == "later"


def test_followers_read_at_each_wait_while_the_feed_cannot_watch(
    kube: KubernetesEmulator, namespace: str, feed: WatchFeed
) -> None:
    make_map(kube, namespace, "unwatched")
    kube.faults.fail(verb="list", resource="configmaps", code=503)
    try:
        with feed.follow(namespace, "unwatched") as follower:
            # Nothing to wait on: each wait ends with the word to read again.
            for _ in range(2):
                assert_told_to_read_again(follower)
            assert not feed.watching
            kube.faults.clear()
            change_map(kube, namespace, "unwatched", "healed")
            wait_for(lambda: feed.watching, timeout=20)
            settle(feed, follower)
            change_map(kube, namespace, "unwatched", "seen")
            assert next_change(follower)[1]["data"]["n"] == "seen"
    finally:
        kube.faults.clear()


def test_a_follower_that_falls_behind_reads_again(
    kube: KubernetesEmulator, namespace: str, feed: WatchFeed
) -> None:
    make_map(kube, namespace, "busy")
    make_map(kube, namespace, "marker")
    with feed.follow(namespace, "busy") as slow, feed.follow(namespace, "marker") as marker:
        settle(feed, slow)
        settle(feed, marker)
        for value in range(feeds.QUEUE_LIMIT + 1):
            change_map(kube, namespace, "busy", str(value))
        change_map(kube, namespace, "marker", "done")
        # One stream, in order: once the marker's change came, all of the busy map's did.
        assert next_change(marker)[1]["data"]["n"] == "done"
        assert_told_to_read_again(slow)
        change_map(kube, namespace, "busy", "fresh")
        assert next_change(slow)[1]["data"]["n"] == "fresh"


def test_a_feed_closes_once_no_one_follows_and_opens_for_the_next(
    kube: KubernetesEmulator, namespace: str, feed: WatchFeed
) -> None:
    make_map(kube, namespace, "first")
    with feed.follow(namespace, "first") as follower:
        settle(feed, follower)
    # At the end of its watch request (two seconds here) with no one following.
    wait_for(lambda: not feed.running, timeout=10)
    requests = feed.watch_requests
    with feed.follow(namespace, "first") as follower:
        settle(feed, follower)
        change_map(kube, namespace, "first", "again")
        assert next_change(follower)[1]["data"]["n"] == "again"
    assert feed.watch_requests > requests


def test_a_stopped_feed_ends_its_watch_at_once_and_followers_read(
    kube: KubernetesEmulator, namespace: str, storage: KubernetesStorage
) -> None:
    long_feed = WatchFeed(storage, "configmaps", SELECTOR, watch_seconds=300)
    make_map(kube, namespace, "stopping")
    with long_feed.follow(namespace, "stopping") as follower:
        settle(long_feed, follower)
        long_feed.stop()
        assert not long_feed.running
        assert not long_feed.watching
        assert_told_to_read_again(follower)


def test_a_follower_that_hears_nothing_for_a_while_reads_again(
    kube: KubernetesEmulator, namespace: str, storage: KubernetesStorage
) -> None:
    quiet_feed = WatchFeed(storage, "configmaps", SELECTOR, watch_seconds=30, resync_seconds=2)
    # Without the feed's label: its changes never reach the feed.
    kube.store.create(
        "configmaps", {"metadata": {"name": "unlabelled", "namespace": namespace}, "data": {}}
    )
    try:
        with quiet_feed.follow(namespace, "unlabelled") as follower:
            settle(quiet_feed, follower)
            change_map(kube, namespace, "unlabelled", "unseen")
            with pytest.raises(FeedRestarted):
                for _ in range(5):
                    for _ in follower.changes(None, 1):
                        raise AssertionError("a change the feed cannot see reached it")
            assert quiet_feed.watching
    finally:
        quiet_feed.stop()

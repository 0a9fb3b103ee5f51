"""The Store contract the cluster simulation relies on."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from devstack.kube.errors import ApiError
from devstack.kube.store import Store


def _cm(name: str, namespace: str = "ns", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, **extra}


def test_create_sets_server_fields_and_returns_a_copy() -> None:
    store = Store()
    source = _cm("a")
    created = store.create("configmaps", source)
    meta = created["metadata"]
    assert meta["resourceVersion"] == "1" and meta["generation"] == 1
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert "uid" not in source["metadata"]  # the input is not modified
    created["metadata"]["name"] = "mutated"
    assert store.get("configmaps", "ns", "a") is not None
    fetched = store.get("configmaps", "ns", "a")
    assert fetched is not None
    fetched["data"] = {"x": "y"}
    assert "data" not in (store.get("configmaps", "ns", "a") or {})


def test_duplicates_and_generate_name() -> None:
    store = Store()
    store.create("configmaps", _cm("a"))
    with pytest.raises(ApiError) as caught:
        store.create("configmaps", _cm("a"))
    assert caught.value.code == 409 and caught.value.reason == "AlreadyExists"
    store.create("configmaps", _cm("a", namespace="other"))  # other namespace: fine
    generated = store.create("configmaps", {"metadata": {"generateName": "g-", "namespace": "ns"}})
    assert (
        generated["metadata"]["name"].startswith("g-") and len(generated["metadata"]["name"]) == 7
    )


def test_list_by_namespace_and_cluster_scope() -> None:
    store = Store()
    store.create("configmaps", _cm("a", "one"))
    store.create("configmaps", _cm("b", "two"))
    store.create("nodes", {"metadata": {"name": "n1"}})
    assert [o["metadata"]["name"] for o in store.list("configmaps", "one")] == ["a"]
    assert sorted(o["metadata"]["name"] for o in store.list("configmaps")) == ["a", "b"]
    assert store.get("nodes", None, "n1") is not None
    assert store.list("pods") == []


def test_update_bumps_version_and_generation_on_spec_change_only() -> None:
    store = Store()
    created = store.create("pods", _cm("p", spec={"a": 1}))
    created["status"] = {"phase": "Running"}
    status_only = store.update("pods", created)
    assert status_only["metadata"]["generation"] == 1
    assert int(status_only["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"]
    )
    assert status_only["metadata"]["uid"] == created["metadata"]["uid"]
    status_only["spec"] = {"a": 2}
    assert store.update("pods", status_only)["metadata"]["generation"] == 2
    with pytest.raises(ApiError) as caught:
        store.update("pods", _cm("ghost"))
    assert caught.value.code == 404


def test_conditional_update() -> None:
    store = Store()
    created = store.create("configmaps", _cm("a"))
    store.update("configmaps", created)
    with pytest.raises(ApiError) as caught:
        store.update("configmaps", created, expected_version=created["metadata"]["resourceVersion"])
    assert caught.value.code == 409


def test_mutate_is_atomic_under_contention() -> None:
    store = Store()
    store.create("configmaps", _cm("counter", data={"n": "0"}))

    def bump(obj: dict[str, Any]) -> None:
        obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)

    def worker() -> None:
        for _ in range(50):
            store.mutate("configmaps", "ns", "counter", bump)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (store.get("configmaps", "ns", "counter") or {})["data"]["n"] == "200"


def test_delete_emits_a_bumped_version() -> None:
    store = Store()
    events: list[tuple[str, str, str]] = []
    store.subscribe(
        lambda kind, resource, obj: events.append(
            (kind, resource, obj["metadata"]["resourceVersion"])
        )
    )
    created = store.create("configmaps", _cm("a"))
    deleted = store.delete("configmaps", "ns", "a")
    assert deleted is not None
    assert int(deleted["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert store.delete("configmaps", "ns", "a") is None
    assert events == [("ADDED", "configmaps", "1"), ("DELETED", "configmaps", "2")]
    assert store.resource_version == "2"


def test_listeners_run_outside_the_lock_in_commit_order() -> None:
    store = Store()
    seen: list[tuple[str, str]] = []

    def listener(kind: str, resource: str, obj: dict[str, Any]) -> None:
        # Reading and writing the store from a listener must not deadlock ...
        store.list("configmaps")
        if obj["metadata"]["name"] == "first" and kind == "ADDED":
            store.create("configmaps", _cm("from-listener"))
        seen.append((kind, obj["metadata"]["name"]))

    other: list[str] = []
    store.subscribe(listener)
    store.subscribe(lambda kind, resource, obj: other.append(obj["metadata"]["name"]))
    store.create("configmaps", _cm("first"))
    store.create("configmaps", _cm("second"))
    # ... and every listener sees the same order, nested writes included.
    assert seen == [("ADDED", "first"), ("ADDED", "from-listener"), ("ADDED", "second")]
    assert other == ["first", "from-listener", "second"]


def test_listeners_get_private_copies_and_can_unsubscribe() -> None:
    store = Store()
    received: list[dict[str, Any]] = []

    def vandal(kind: str, resource: str, obj: dict[str, Any]) -> None:
        obj["metadata"]["name"] = "vandalised"

    store.subscribe(vandal)
    unsubscribe = store.subscribe(lambda kind, resource, obj: received.append(obj))
    store.create("configmaps", _cm("a"))
    assert received[0]["metadata"]["name"] == "a"
    unsubscribe()
    store.create("configmaps", _cm("b"))
    assert len(received) == 1


def test_a_failing_listener_does_not_stop_the_others() -> None:
    store = Store()
    received: list[str] = []

    def broken(kind: str, resource: str, obj: dict[str, Any]) -> None:
        raise RuntimeError("boom")

    store.subscribe(broken)
    store.subscribe(lambda kind, resource, obj: received.append(kind))
    store.create("configmaps", _cm("a"))
    assert received == ["ADDED"]


def test_concurrent_writers_produce_ordered_events() -> None:
    store = Store()
    versions: list[int] = []
    store.subscribe(
        lambda kind, resource, obj: versions.append(int(obj["metadata"]["resourceVersion"]))
    )

    def writer(prefix: str) -> None:
        for i in range(100):
            store.create("configmaps", _cm(f"{prefix}-{i}"))

    threads = [threading.Thread(target=writer, args=(str(n),)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert versions == list(range(1, 401))


def _owned_by(name: str, *uids: str, namespace: str = "ns") -> dict[str, Any]:
    """The metadata of ``name`` naming the owners ``uids``."""
    references = [{"kind": "ConfigMap", "name": f"owner-{uid}", "uid": uid} for uid in uids]
    return {"name": name, "namespace": namespace, "ownerReferences": references}


def test_dependents_follow_the_owner_references_of_every_write() -> None:
    """The index the garbage collector reads agrees with what is stored after creates,
    batch loads, updates that add or drop references, and deletes."""
    store = Store()
    store.create("configmaps", {"metadata": _owned_by("a", "u1")})
    store.create("secrets", {"metadata": _owned_by("b", "u1", "u2", namespace="other")})
    store.create("configmaps", _cm("plain"))
    store.load("pods", [{"metadata": _owned_by("c", "u2")}])
    assert store.dependents("u1") == [("configmaps", "ns", "a"), ("secrets", "other", "b")]
    assert store.dependents("u2") == [("secrets", "other", "b"), ("pods", "ns", "c")]

    current = store.get("secrets", "other", "b")
    assert current is not None
    current["metadata"]["ownerReferences"] = current["metadata"]["ownerReferences"][1:]
    store.update("secrets", current)
    assert store.dependents("u1") == [("configmaps", "ns", "a")]

    def adopt(obj: dict[str, Any]) -> None:
        obj["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": "c", "uid": "u3"}]

    store.mutate("configmaps", "ns", "plain", adopt)
    assert store.dependents("u3") == [("configmaps", "ns", "plain")]

    store.delete("configmaps", "ns", "a")
    store.delete("pods", "ns", "c")
    assert store.dependents("u1") == []
    assert store.dependents("u2") == [("secrets", "other", "b")]
    assert store.dependents("unknown") == []

"""A kind is one package behind the engine: the notes (``tests.engine.notes``), declared in
this test package alone and registered with one line, get what every kind of the service
gets: create, read, list, delete and events with replay; an operation a killed worker held
is finished by another; records rebuilt after Redis loses them; Kubernetes' changes followed
between operations."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import redis

from app.extensions.labs import machinery_of
from devstack.kube import KubernetesEmulator
from tests.engine.conftest import MakeNotesApp
from tests.engine.notes.kind import GONE, NAMESPACE, note_ref, object_name
from tests.labs.conftest import LabUser, read_stream, wait_for
from tests.support.held_service import held_service


def _url(user: LabUser, name: str = "") -> str:
    return f"/spawner/v1/labs/{user.username}/notes" + (f"/{name}" if name else "")


def _status(client: Any, user: LabUser, name: str) -> int:
    return int(client.get(_url(user, name), headers=user.headers).status_code)


def test_a_note_is_created_read_listed_followed_and_deleted(
    notes_app: MakeNotesApp, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    client = notes_app().test_client()
    user, stranger = new_user(), new_user()

    created = client.post(_url(user), json={"name": "first", "text": "hello"}, headers=user.headers)
    assert created.status_code == 201, created.get_data(as_text=True)
    assert created.get_json()["status"] == "starting"
    again = client.post(_url(user), json={"name": "first", "text": "hi"}, headers=user.headers)
    assert again.status_code == 409

    events = read_stream(client, _url(user, "first") + "/events", user.headers)
    assert [e.data for e in events if e.type == "info"] == [
        "Note first requested",
        "Writing note first",
    ]
    assert events[-1].type == "complete"
    resumed = read_stream(client, _url(user, "first") + "/events", user.headers, events[1].id)
    assert [e.id for e in resumed] == [e.id for e in events[2:]]

    note = client.get(_url(user, "first"), headers=user.headers).get_json()
    assert (note["status"], note["text"]) == ("running", "hello")
    stored = kube.store.get("configmaps", NAMESPACE, object_name(user.username, "first"))
    assert stored is not None and stored["data"] == {"text": "hello"}
    listed = client.get(_url(user), headers=user.headers).get_json()
    assert [n["name"] for n in listed] == ["first"]
    assert client.get(_url(user), headers=stranger.headers).status_code == 403

    deleted = client.delete(_url(user, "first"), headers=user.headers)
    assert (deleted.status_code, deleted.get_json()["status"]) == (202, "terminating")
    going = read_stream(client, _url(user, "first") + "/events", user.headers)
    assert going[0].data == "Deletion of note first requested" and going[-1].type == "complete"
    assert _status(client, user, "first") == 404
    assert kube.store.get("configmaps", NAMESPACE, object_name(user.username, "first")) is None


def test_a_note_a_killed_worker_was_writing_is_written_by_another(
    notes_app: MakeNotesApp,
    notes_config: dict[str, Any],
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
) -> None:
    app = notes_app()
    client = app.test_client()
    user = new_user()
    events = machinery_of(app).engine.events
    with held_service("tests.engine.hold_a_note", [user.username, "held"], notes_config) as holder:
        key = note_ref(user.username, "held").key
        wait_for(lambda: any(e.data == "Writing note held" for e in events.read(key)), timeout=60)
        assert _status(client, user, "held") == 200
        holder.send_signal(signal.SIGKILL)

    wait_for(
        lambda: (
            client.get(_url(user, "held"), headers=user.headers).get_json()["status"] == "running"
        ),
        timeout=30,
    )
    stored = kube.store.get("configmaps", NAMESPACE, object_name(user.username, "held"))
    assert stored is not None and stored["data"] == {"text": "written by the survivor"}
    written = read_stream(client, _url(user, "held") + "/events", user.headers)
    assert [e.type for e in written].count("complete") == 1
    assert [e.data for e in written].count("Writing note held") == 2, "begun, then resumed"


def test_notes_are_rebuilt_after_redis_loss_and_follow_kubernetes(
    notes_app: MakeNotesApp,
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
    redis_client: redis.Redis,
) -> None:
    client = notes_app().test_client()
    user = new_user()
    for name in ("kept", "lost"):
        body = {"name": name, "text": f"the {name} one"}
        assert client.post(_url(user), json=body, headers=user.headers).status_code == 201
        assert (
            read_stream(client, _url(user, name) + "/events", user.headers)[-1].type == "complete"
        )
    before = client.get(_url(user), headers=user.headers).get_json()

    redis_client.flushall()
    answers: list[int] = []

    def rebuilt() -> bool:
        listed = client.get(_url(user), headers=user.headers)
        answers.append(listed.status_code)
        assert listed.status_code in (200, 503), listed.get_data(as_text=True)
        return listed.status_code == 200 and listed.get_json() == before

    wait_for(rebuilt, timeout=30)
    assert 404 not in answers

    kube.store.delete("configmaps", NAMESPACE, object_name(user.username, "lost"))

    def failed() -> dict[str, Any] | None:
        note: dict[str, Any] = client.get(_url(user, "lost"), headers=user.headers).get_json()
        return note if note["status"] == "failed" else None

    assert wait_for(failed, timeout=30)["error"] == GONE
    assert client.get(_url(user, "kept"), headers=user.headers).get_json()["status"] == "running"

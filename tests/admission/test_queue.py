"""Fair admission: bursts of three groups share the places round-robin, first come first
served within each group; a waiting spawn's stream counts its position down; a place comes
back when its spawn fails or is deleted; a full queue refuses with 503.

The places are held by spawns of an image whose pull takes a minute, so the queue forms
behind them whatever the machine's speed; deleting them opens the places.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable

import redis
from flask.testing import FlaskClient

from app.engine.admission import STARTED_TEXT
from app.extensions.labs import machinery_of
from devstack.kube import KubernetesEmulator
from tests.admission.conftest import PREFIX, AdmissionLog, Member, spawn
from tests.labs.conftest import read_events, wait_for

POSITION = re.compile(r"^Waiting for a place to start: number (\d+) in the queue$")


def _queue(client: FlaskClient) -> list[str]:
    """The names of the workloads waiting, in the order they will be admitted."""
    admission = machinery_of(client.application).engine.admission
    assert admission is not None
    return [waiting.ref.name for waiting in admission.store.queue()]


def _delete(client: FlaskClient, user: Member, headers: dict[str, str]) -> None:
    response = client.delete(f"/spawner/v1/labs/{user.username}", headers=headers)
    assert response.status_code == 202, response.get_data(as_text=True)


def test_three_groups_bursts_share_the_places_round_robin_and_in_order_within_each(
    admission_app: Callable[..., FlaskClient],
    member: Callable[[str], Member],
    held_image: str,
    admission_log: AdmissionLog,
    admin_headers: dict[str, str],
) -> None:
    client = admission_app({"maxInProgress": 2})
    holders = [member("holders"), member("holders")]
    for holder in holders:
        assert spawn(client, holder, held_image) == 303
    a = [member("team-a") for _ in range(12)]
    b = [member("team-b") for _ in range(4)]
    c = [member("team-c") for _ in range(2)]
    # Interleaved arrivals: each group's own order is what must be kept.
    arrivals = [*a[:6], b[0], b[1], c[0], *a[6:], b[2], b[3], c[1]]
    for user in arrivals:
        assert spawn(client, user) == 303
    # Each turn admits one of every group with one waiting, by arrival within the turn.
    fair = [a[0], b[0], c[0], a[1], b[1], c[1], a[2], b[2], a[3], b[3], *a[4:]]
    expected = [user.username for user in fair]
    assert _queue(client) == expected
    waiting = client.get(f"/spawner/v1/labs/{c[1].username}", headers=admin_headers)
    assert waiting.get_json()["status"] == "starting"

    for holder in holders:
        _delete(client, holder, admin_headers)
    wait_for(lambda: len(admission_log.read()) == len(arrivals), timeout=60)
    assert admission_log.admitted == expected

    for user in arrivals:
        events = read_events(client, user.username, user.headers)
        assert events[-1].type == "complete", events[-1].data
        infos = [event.data for event in events if event.type == "info"]
        admitted_at = infos.index(STARTED_TEXT)
        positions = [int(m.group(1)) for text in infos if (m := POSITION.match(text))]
        # Announced only as they go down, all before the admission, the last within the
        # two places that opened.
        assert positions == sorted(set(positions), reverse=True), positions
        assert all(POSITION.match(text) is None for text in infos[admitted_at:])
        assert 1 <= positions[-1] <= 2
    assert _queue(client) == []


def test_a_failed_spawn_gives_its_place_to_the_next_in_the_queue(
    admission_app: Callable[..., FlaskClient],
    member: Callable[[str], Member],
    held_image: str,
    admission_log: AdmissionLog,
    admin_headers: dict[str, str],
    kube: KubernetesEmulator,
) -> None:
    client = admission_app({"maxInProgress": 1})
    holder, failing, after = member("g-one"), member("g-two"), member("g-three")
    assert spawn(client, holder, held_image) == 303
    kube.cluster.faults.set("unschedulable", f"nublado-{failing.username}/*", "by the test")
    try:
        assert spawn(client, failing) == 303
        assert spawn(client, after) == 303
        assert _queue(client) == [failing.username, after.username]
        _delete(client, holder, admin_headers)
        failed = read_events(client, failing.username, failing.headers)
    finally:
        kube.cluster.faults.clear()
    assert failed[-1].type == "failed"
    assert STARTED_TEXT in [event.data for event in failed]
    events = read_events(client, after.username, after.headers)
    assert events[-1].type == "complete"
    assert admission_log.read() == [failing.username, after.username]


def test_a_delete_withdraws_a_waiting_spawn_and_is_never_queued(
    admission_app: Callable[..., FlaskClient],
    member: Callable[[str], Member],
    held_image: str,
    admin_headers: dict[str, str],
    redis_client: redis.Redis,
) -> None:
    client = admission_app({"maxInProgress": 1})
    holder, first, second = member("g-one"), member("g-two"), member("g-three")
    assert spawn(client, holder, held_image) == 303
    assert spawn(client, first) == 303
    assert spawn(client, second) == 303
    # The delete runs at once, with every place taken, and the one behind moves up.
    _delete(client, first, admin_headers)
    events = read_events(client, first.username, first.headers)
    assert events[-1].type == "complete"
    gone = client.get(f"/spawner/v1/labs/{first.username}", headers=admin_headers)
    assert gone.status_code == 404
    assert _queue(client) == [second.username]
    assert _infos_so_far(client, second)[-1] == (
        "Waiting for a place to start: number 1 in the queue"
    )
    # Deleting the holder frees its place for the one still waiting.
    _delete(client, holder, admin_headers)
    assert read_events(client, second.username, second.headers)[-1].type == "complete"
    places = redis_client.hgetall(f"{PREFIX}admission:running")
    assert list(places) in ([], [f"lab:{second.username}"])


def _infos_so_far(client: FlaskClient, user: Member) -> list[str]:
    """The info events of ``user``'s operation so far, read from Redis: it is still waiting,
    so its stream would not close."""
    events = machinery_of(client.application).engine.events.read(f"lab:{user.username}")
    return [event.data for event in events if event.type.value == "info"]


def test_a_full_queue_refuses_with_503_and_writes_nothing(
    admission_app: Callable[..., FlaskClient],
    member: Callable[[str], Member],
    held_image: str,
    admin_headers: dict[str, str],
) -> None:
    client = admission_app({"maxInProgress": 1, "maxWaiting": 2})
    holder = member("g-one")
    assert spawn(client, holder, held_image) == 303
    assert spawn(client, member("g-two")) == 303
    assert spawn(client, member("g-two")) == 303
    refused_user = member("g-three")
    refused = client.post(
        f"/spawner/v1/labs/{refused_user.username}/spawn",
        json={"options": {"image": held_image, "size": "small"}, "env": {}},
        headers=refused_user.headers,
    )
    assert refused.status_code == 503
    assert refused.get_json()["code"] == "queue_full"
    assert int(refused.headers["Retry-After"]) >= 1
    status = client.get(f"/spawner/v1/labs/{refused_user.username}", headers=admin_headers)
    assert status.status_code == 404
    _delete(client, holder, admin_headers)


def test_a_kernel_waits_its_turn_in_the_same_queue(
    admission_app: Callable[..., FlaskClient],
    member: Callable[[str], Member],
    held_image: str,
    admission_log: AdmissionLog,
    admin_headers: dict[str, str],
) -> None:
    """Admission is the engine's: a kind that declares it admitted waits like a lab."""
    budgets = {"default": {"clusters": 1, "workers": 3, "kernels": 2, "cpu": 8, "memory": "32Gi"}}
    client = admission_app({"maxInProgress": 1}, budgets=budgets)
    user, holder = member("g-kernels"), member("g-holders")
    assert spawn(client, user) == 303
    assert read_events(client, user.username, user.headers)[-1].type == "complete"
    assert spawn(client, holder, held_image) == 303
    created = client.post(
        f"/spawner/v1/labs/{user.username}/kernels",
        json={"size": "small", "connection": {"key": secrets.token_hex(32)}},
        headers=user.headers,
    )
    assert created.status_code == 201, created.get_data(as_text=True)
    kernel_id = created.get_json()["kernel_id"]
    kernel = f"{user.username}/{kernel_id}"
    assert _queue(client) == [kernel]
    operations = client.get("/spawner/v1/operations", headers=admin_headers).get_json()
    (waiting,) = [o for o in operations if "position" in o]
    assert waiting["username"] == kernel and waiting["workload"] == "kernel"
    assert (waiting["kind"], waiting["position"], waiting["worker"]) == ("spawn", 1, None)
    assert waiting["group"] == "g-kernels"
    running = [o for o in operations if o["username"] == holder.username]
    assert [(o["workload"], o["kind"], "position" in o) for o in running] == [
        ("lab", "spawn", False)
    ]
    _delete(client, holder, admin_headers)
    wait_for(lambda: admission_log.read() == [f"kernel:{kernel}"])
    url = f"/spawner/v1/labs/{user.username}/kernels/{kernel_id}"

    def running() -> bool:
        body = client.get(url, headers=user.headers).get_json()
        return bool(body["status"] == "running")

    wait_for(running)

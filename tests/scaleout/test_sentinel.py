"""Redis failing over under the service: a storm of spawns with a failover in the middle.

The stack (``conftest``) runs three replicas behind the balancer and Redis as a primary, a
replica and three sentinels (``devstack.sentinel``); the service reaches Redis through the
sentinels only. A failover is forced while users
spawn and a poller reads their status: every spawn completes with exactly one pod, every lab
is listed once, answers during the failover are 503 ``dependency_unavailable`` (counted,
never a 500, never a request left hanging), none after it, and an event stream read before
the failover resumes after it from its ``Last-Event-ID``. Killing the primary outright is
survived too, once the killed server is back as a replica (as a restarted pod comes back).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import redis
import requests

from app.config import parse_config
from app.extensions.redis import build_redis
from devstack.sentinel import SentinelGroup
from devstack.stack import LocalStack
from tests.scaleout.storm import add_users
from tests.support.sse import SseEvent, parse_sse

STORM_USERS = 40
KILL_USERS = 8
REQUEST_TIMEOUT = 20.0
"""Far above anything a request may take when Redis fails fast (its socket timeout is two
seconds); a request reaching it counts as hung."""


def _group(stack: LocalStack) -> SentinelGroup:
    assert stack.sentinel is not None
    return stack.sentinel


@dataclass
class Answers:
    """Every answer the test's clients got, with when its request started and ended."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    seen: list[tuple[float, float, int, str]] = field(default_factory=list)
    hung: list[str] = field(default_factory=list)

    def call(self, method: str, url: str, **kwargs: Any) -> requests.Response | None:
        started = time.monotonic()
        try:
            response = requests.request(
                method, url, timeout=REQUEST_TIMEOUT, allow_redirects=False, **kwargs
            )
        except requests.Timeout:
            with self.lock:
                self.hung.append(f"{method} {url}")
            return None
        code = ""
        if response.status_code >= 500:
            code = str((response.json() or {}).get("code", ""))
        with self.lock:
            self.seen.append((started, time.monotonic(), response.status_code, code))
        return response

    def unavailable(self) -> list[tuple[float, float, int, str]]:
        with self.lock:
            return [a for a in self.seen if a[2] == 503]

    def server_errors(self) -> list[tuple[float, float, int, str]]:
        with self.lock:
            return [a for a in self.seen if a[2] >= 500 and a[2] != 503]


def _admin(stack: LocalStack) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.state()['tokens']['admin']['token']}"}


def _spawn(stack: LocalStack, answers: Answers, user: str, token: str) -> None:
    """Spawn until the service takes it: 503s during the failover are tried again, as
    JupyterHub's user would; a 409 after one means an earlier try went through."""
    url = f"{stack.spawner_url}/spawner/v1/labs/{user}/spawn"
    body = {"options": {"image": stack.demo_image, "size": "small"}, "env": {}}
    failed_before = False
    while True:
        response = answers.call(
            "POST", url, json=body, headers={"Authorization": f"Bearer {token}"}
        )
        if response is not None and response.status_code == 303:
            return
        if response is not None and response.status_code == 409 and failed_before:
            return
        assert response is None or response.status_code == 503, response.text
        failed_before = True
        time.sleep(0.1)


def _wait(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except (requests.RequestException, ValueError):
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _all_running(stack: LocalStack, answers: Answers, users: list[str]) -> bool:
    admin = _admin(stack)
    for user in users:
        response = answers.call("GET", f"{stack.spawner_url}/spawner/v1/labs/{user}", headers=admin)
        if response is None or response.status_code != 200:
            return False
        assert response.json()["status"] != "failed", response.json()
        if response.json()["status"] != "running":
            return False
    return True


def _assert_one_lab_each(stack: LocalStack, users: list[str]) -> None:
    for user in users:
        pods = [p["metadata"]["name"] for p in stack.kube.store.list("pods", f"nublado-{user}")]
        assert pods == [f"nb-{user}-lab"], f"{user}: {pods}"
    listed = requests.get(
        f"{stack.spawner_url}/spawner/v1/labs", headers=_admin(stack), timeout=10
    ).json()
    for user in users:
        assert listed.count(user) == 1, f"{user} listed {listed.count(user)} times"


def _events(stack: LocalStack, user: str, token: str, last_id: str | None = None) -> Iterator[Any]:
    headers = {"Authorization": f"Bearer {token}"}
    if last_id is not None:
        headers["Last-Event-ID"] = last_id
    with requests.get(
        f"{stack.spawner_url}/spawner/v1/labs/{user}/events",
        headers=headers,
        stream=True,
        timeout=REQUEST_TIMEOUT,
    ) as response:
        assert response.status_code == 200, response.text
        for event in parse_sse(response.iter_content(None)):
            if isinstance(event, SseEvent):
                yield event


class _Poller(threading.Thread):
    """Reads labs' status over and over, as JupyterHub does, until stopped."""

    def __init__(self, stack: LocalStack, answers: Answers, users: list[str]) -> None:
        super().__init__(daemon=True)
        self.stack, self.answers, self.users = stack, answers, users
        self.stopping = threading.Event()

    def run(self) -> None:
        admin = _admin(self.stack)
        while not self.stopping.is_set():
            for user in self.users:
                url = f"{self.stack.spawner_url}/spawner/v1/labs/{user}"
                self.answers.call("GET", url, headers=admin)
                if self.stopping.is_set():
                    return


def _writes_accepted(stack: LocalStack) -> float:
    """When a client built as the service builds its own first wrote to Redis again."""
    client = build_redis(parse_config(stack.service_config()).redis)
    try:

        def written() -> bool:
            try:
                return bool(client.set("spawner:test:failover-probe", "1"))
            except redis.ConnectionError:
                return False

        _wait(written, 60, "Redis to accept writes again")
        return time.monotonic()
    finally:
        client.close()


def test_a_storm_of_spawns_survives_a_failover_with_one_lab_each(stack: LocalStack) -> None:
    tokens = add_users(stack, "fo", STORM_USERS, first_uid=40000)
    users = sorted(tokens)
    answers = Answers()
    poller = _Poller(stack, answers, users)
    poller.start()
    first, rest = users[: STORM_USERS // 4], users[STORM_USERS // 4 :]

    # A first wave is under way, and one of its streams has been read from, when Redis fails
    # over; the rest of the storm arrives once the replica is promoted, while the new
    # primary still refuses writes (it waits for a replica of its own, which the sentinels
    # make of the old primary several seconds later), and goes on after.
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda u: _spawn(stack, answers, u, tokens[u]), first))
    watched = first[-1]
    stream = _events(stack, watched, tokens[watched])
    before = [next(stream)]
    stream.close()

    failover_started = time.monotonic()
    old_primary = _group(stack).failover()
    storm = ThreadPoolExecutor(8)
    futures = [storm.submit(_spawn, stack, answers, u, tokens[u]) for u in rest]
    failover_ended = _writes_accepted(stack)
    for future in futures:
        future.result()
    storm.shutdown()
    assert _group(stack).primary_address() != old_primary

    _wait(lambda: _all_running(stack, answers, users), 90, "every lab to run")
    poller.stopping.set()
    poller.join()

    _assert_one_lab_each(stack, users)
    assert not answers.hung, f"requests left hanging: {answers.hung}"
    assert not answers.server_errors(), answers.server_errors()
    unavailable = answers.unavailable()
    # The failover was felt, and answered as the dependency's outage it is ...
    assert unavailable, "no request was answered 503 during the failover"
    assert {code for *_, code in unavailable} == {"dependency_unavailable"}
    # ... and only while it lasted: no 503 to a request that began once writes were back.
    late = [a for a in unavailable if a[0] > failover_ended or a[1] < failover_started]
    assert not late, f"503s outside the failover window: {late}"
    print(f"\n503 answers during the failover: {len(unavailable)} of {len(answers.seen)}")

    # The stream read before the failover resumes after it, from where it was left.
    resumed = list(_events(stack, watched, tokens[watched], last_id=before[-1].id))
    assert resumed and resumed[-1].type == "complete", [e.type for e in resumed]
    assert before[-1].id not in {e.id for e in resumed}
    assert all(_entry(e.id) > _entry(before[-1].id) for e in resumed)


def _entry(event_id: str | None) -> tuple[int, int]:
    """A Redis Streams entry id (``ms-seq``), ordered."""
    assert event_id is not None
    ms, _, seq = event_id.partition("-")
    return int(ms), int(seq or 0)


def test_killing_the_primary_mid_spawn_is_survived(stack: LocalStack) -> None:
    group = _group(stack)
    # The previous failover's old primary is back as a replica before this one starts.
    _wait(group.ready, 60, "the sentinels to see a replica again")
    tokens = add_users(stack, "pkill", KILL_USERS, first_uid=44000)
    users = sorted(tokens)
    answers = Answers()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda u: _spawn(stack, answers, u, tokens[u]), users[:4]))

    killed = group.kill_primary()
    # Spawns arrive while no primary is known, and after one is.
    with ThreadPoolExecutor(4) as pool:
        waves = [pool.submit(_spawn, stack, answers, u, tokens[u]) for u in users[4:]]
        group.restart(killed)
        for wave in waves:
            wave.result()
    assert group.primary().port != killed.port

    _wait(lambda: _all_running(stack, answers, users), 90, "every lab to run")
    _assert_one_lab_each(stack, users)
    assert not answers.hung, f"requests left hanging: {answers.hung}"
    assert not answers.server_errors(), answers.server_errors()
    assert {code for *_, code in answers.unavailable()} <= {"dependency_unavailable"}

"""Benchmark: how long the service cannot write while Redis fails over, and what it answers.

The local stack runs Redis as a primary, a replica and three sentinels (``devstack.sentinel``:
a primary judged down after one second of silence, a quorum of two), and the service reaches
it through the sentinels. A client spawns labs one after another, as fast as the answers come
(a 503 is tried again at once, after 20 ms), while Redis fails, ``runs`` times each way:

- ``kill``: the primary gets SIGKILL. Once the sentinels name a new primary, the killed server
  is started again as its replica, as Kubernetes restarts a pod (without a replica the new
  primary refuses writes: ``min-replicas-to-write``, which is what makes a failover lose
  nothing). Measured from the kill.
- ``failover``: ``SENTINEL FAILOVER``, as for maintenance; the old primary keeps running and
  the sentinels make it the new primary's replica some seconds later. Measured from the
  command.

Each run reports when the sentinels named the new primary, when the first spawn was accepted
through it (a 303 to a request sent after the failure), how many requests were answered 503
(``dependency_unavailable``) in between, any other error, and the longest request: with Redis
failing fast none should come near the client's timeout.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import requests

from app.runtime.defaults import default_workers
from bench.stats import median
from devstack.gafaelfawr import GroupSpec, UserSpec
from devstack.sentinel import SentinelGroup
from devstack.stack import LocalStack, StackOptions

EXEC_SCOPES = ("exec:notebook", "read:image")
REQUEST_TIMEOUT = 30.0
FIRST_UID = 30000
CONFIG = {
    "operations": {"leaseSeconds": 2, "scanSeconds": 0.5},
    "watcher": {"leaseSeconds": 2},
    "limits": {"mutationsPerMinute": 1_000_000},
}


class _Spawner(threading.Thread):
    """Spawns one lab after another for fresh users, recording every answer."""

    def __init__(self, stack: LocalStack, tokens: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.stack = stack
        self.pending = sorted(tokens)
        self.tokens = tokens
        self.stopping = threading.Event()
        self.active = threading.Event()
        """Spawns are sent only during a run, so labs do not pile up between runs."""
        self.lock = threading.Lock()
        self.answers: list[tuple[float, float, int, str]] = []
        """(started, ended, status, error code) of every request."""
        self.hung = 0

    def run(self) -> None:
        body = {"options": {"image": self.stack.demo_image, "size": "small"}, "env": {}}
        session = requests.Session()
        while not self.stopping.is_set() and self.pending:
            if not self.active.wait(0.1):
                continue
            user = self.pending[0]
            url = f"{self.stack.spawner_url}/spawner/v1/labs/{user}/spawn"
            started = time.monotonic()
            try:
                response = session.post(
                    url,
                    json=body,
                    headers={"Authorization": f"Bearer {self.tokens[user]}"},
                    allow_redirects=False,
                    timeout=REQUEST_TIMEOUT,
                )
            except requests.RequestException:
                self.hung += 1
                continue
            code = ""
            if response.status_code >= 400:
                code = str((response.json() or {}).get("code", ""))
            with self.lock:
                self.answers.append((started, time.monotonic(), response.status_code, code))
            if response.status_code in (303, 409):
                self.pending.pop(0)
                time.sleep(0.1)
            else:
                time.sleep(0.02)

    def since(self, moment: float) -> list[tuple[float, float, int, str]]:
        with self.lock:
            return [a for a in self.answers if a[0] >= moment]

    def accepted_after(self, moment: float) -> float | None:
        """When the first spawn sent after ``moment`` was accepted (303)."""
        return next((a[1] for a in self.since(moment) if a[2] == 303), None)


def _users(stack: LocalStack, count: int) -> dict[str, str]:
    tokens = {}
    for index in range(count):
        name = f"failover{index:03d}"
        uid = FIRST_UID + index
        stack.gafaelfawr.add_user(
            UserSpec(username=name, uid=uid, gid=uid, groups=(GroupSpec(name, uid),))
        )
        tokens[name] = stack.gafaelfawr.issue_token(name, EXEC_SCOPES)
    return tokens


def _until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen in {timeout:g} s")
        time.sleep(0.01)


def _one_run(group: SentinelGroup, spawner: _Spawner, how: str) -> dict[str, Any]:
    _until(lambda: group.ready(), 60, "the sentinels to see every replica")
    # Spawns are flowing before Redis fails.
    spawner.active.set()
    before = time.monotonic()
    _until(lambda: spawner.accepted_after(before), 30, "a spawn before the failure")
    old = group.primary_address()
    failed = time.monotonic()
    if how == "kill":
        killed = group.kill_primary()
        group.wait_for_new_primary(old)
        elected = time.monotonic()
        group.restart(killed)
        after = failed
    else:
        group.failover()
        elected = time.monotonic()
        # Until the promotion the old primary may still take a write; count from it.
        after = elected
    accepted = _until(lambda: spawner.accepted_after(after), 120, "a spawn after the failure")
    spawner.active.clear()
    answers = [a for a in spawner.since(failed) if a[0] < accepted]
    return {
        "new_primary_named_seconds": round(elected - failed, 3),
        "first_spawn_accepted_seconds": round(accepted - failed, 3),
        "unavailable_503": sum(1 for a in answers if a[2] == 503),
        "other_errors": sorted({f"{a[2]} {a[3]}" for a in answers if a[2] >= 400 and a[2] != 503}),
        "longest_request_ms": round(max((a[1] - a[0] for a in answers), default=0.0) * 1000, 1),
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "runs": runs,
        "new_primary_named_median_seconds": round(
            median([r["new_primary_named_seconds"] for r in runs]), 3
        ),
        "first_spawn_accepted_median_seconds": round(
            median([r["first_spawn_accepted_seconds"] for r in runs]), 3
        ),
        "unavailable_503_median": median([r["unavailable_503"] for r in runs]),
        "longest_request_max_ms": max(r["longest_request_ms"] for r in runs),
        "other_errors": sorted({e for r in runs for e in r["other_errors"]}),
    }


def run(
    workdir: Path, *, kill_runs: int = 5, failover_runs: int = 3, workers: int | None = None
) -> dict[str, Any]:
    workers = default_workers() if workers is None else workers
    stack = LocalStack(
        StackOptions(
            state_dir=workdir / "failover",
            redis_sentinel=True,
            workers=workers,
            nodes=6,
            pull_seconds=0.0,
            config_overrides=CONFIG,
        )
    ).start()
    try:
        group = stack.sentinel
        assert group is not None
        spawner = _Spawner(stack, _users(stack, 20 * (kill_runs + failover_runs) + 20))
        spawner.start()
        kills = [_one_run(group, spawner, "kill") for _ in range(kill_runs)]
        failovers = [_one_run(group, spawner, "failover") for _ in range(failover_runs)]
        spawner.stopping.set()
        spawner.join(timeout=REQUEST_TIMEOUT + 5)
        return {
            "workers": workers,
            "down_after_ms": group.down_after_ms,
            "replicas": len(group.nodes) - 1,
            "sentinels": len(group.sentinel_ports),
            "min_replicas_to_write": group.min_replicas_to_write,
            "kill": _summary(kills),
            "failover": _summary(failovers),
            "requests_hung": spawner.hung,
        }
    finally:
        stack.stop()

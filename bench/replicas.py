"""Benchmark: one, two and three replicas of the service behind the balancer, and how fast
leadership moves when a leader replica dies.

Each replica is a gunicorn master with one worker, all behind the local stack's HAProxy
(in front of a single replica too, so every count pays the same hop). For each count, in
``runs`` fresh stacks: a storm of ``users`` spawns at once from the storm client (its own
process; every request through the balancer, so a spawn's events are mostly read from
another replica than the one that took its POST), then status reads of those labs for
``status_seconds``. Medians over the runs are reported.

Leader failover, on three replicas: the replica leading the lab watcher is killed with
SIGKILL (master and workers), and the time until every loop it led is led by another replica
(``GET /spawner/v1/leaders`` polled every 50 ms through the balancer) is measured; the replica
is started again before the next round. The elected loops' leases are ``lease_seconds``,
by default the service's default of 10 s (a successor leads within about 1.25 leases).

Everything shares this machine's two cores: more replicas add no cores, so what the figures
show is what replicas cost and whether work spreads, not a speed-up a cluster would give.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from bench.services import UNCAPPED
from bench.stats import median
from bench.status import status_load
from bench.storm import LABS_PER_NODE
from devstack.demo import add_load_users
from devstack.gafaelfawr import GroupSpec
from devstack.stack import REPO_ROOT, LocalStack, StackOptions

GROUP = GroupSpec("replica-bench", 5000)
USER_FORMAT = "replica-%04d"


def _stack(workdir: Path, replicas: int, users: int, lease_seconds: float) -> LocalStack:
    options = StackOptions(
        state_dir=workdir,
        replicas=replicas,
        balancer=True,
        workers=1,
        nodes=max(3, math.ceil(users / LABS_PER_NODE)),
        pull_seconds=0.0,
        config_overrides={
            **UNCAPPED,
            "watcher": {"leaseSeconds": lease_seconds},
            "images": {"leaseSeconds": lease_seconds},
            "prepuller": {"leaseSeconds": lease_seconds},
        },
    )
    return LocalStack(options).start()


def _storm(stack: LocalStack, tokens: dict[str, str]) -> dict[str, Any]:
    """Every user's spawn at once, followed to its end, by ``bench.storm_client``."""
    host, _, port = stack.spawner_url.removeprefix("http://").partition(":")
    job = {
        "host": host,
        "port": int(port),
        "timeout": 300,
        "mode": "spawn",
        "image": stack.demo_image,
        "users": list(tokens.items()),
    }
    completed = subprocess.run(
        [sys.executable, "-m", "bench.storm_client"],
        input=json.dumps(job).encode(),
        capture_output=True,
        cwd=str(REPO_ROOT),
        timeout=600,
        check=True,
    )
    output = json.loads(completed.stdout)
    results = output["results"]
    done = [r for r in results if r.get("outcome") == "complete"]
    finished = [r["done_at"] for r in done]
    return {
        "completed": len(done),
        "failed": len(results) - len(done),
        "seconds": round(max(finished) - output["started_at"], 2) if finished else None,
    }


def _leaders(stack: LocalStack, token: str) -> dict[str, Any]:
    response = requests.get(
        f"{stack.spawner_url}/spawner/v1/leaders",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    response.raise_for_status()
    return {entry["loop"]: entry["leader"] for entry in response.json()}


def _leader_failover(stack: LocalStack, token: str, timeout: float = 60.0) -> float:
    """Kill the replica leading the lab watcher; seconds until its loops lead elsewhere."""
    deadline = time.monotonic() + timeout
    while not all((found := _leaders(stack, token)).values()):
        if time.monotonic() > deadline:
            raise RuntimeError("no leader for every loop")
        time.sleep(0.05)
    victim = found["lab-watcher"]["replica"]["name"]
    loops = [loop for loop, leader in found.items() if leader["replica"]["name"] == victim]
    replica = stack.replica_named(victim)
    killed = time.monotonic()
    stack.kill_replica(replica)
    while True:
        now = _leaders(stack, token)
        if all(now[loop] and now[loop]["replica"]["name"] != victim for loop in loops):
            moved = time.monotonic() - killed
            break
        if time.monotonic() > killed + timeout:
            raise RuntimeError("leadership did not move")
        time.sleep(0.05)
    stack.start_replica(replica)
    return round(moved, 2)


def run(
    workdir: Path,
    counts: tuple[int, ...] = (1, 2, 3),
    users: int = 200,
    runs: int = 3,
    status_seconds: float = 5.0,
    failovers: int = 5,
    lease_seconds: float = 10.0,
) -> dict[str, Any]:
    by_count: dict[str, Any] = {}
    names = [USER_FORMAT % index for index in range(users)]
    for count in counts:
        storms: list[dict[str, Any]] = []
        status: list[dict[str, Any]] = []
        for index in range(runs):
            stack = _stack(workdir / f"replicas-{count}-{index}", count, users, lease_seconds)
            try:
                tokens = add_load_users(stack.gafaelfawr, names, first_uid=50000, group=GROUP)
                storms.append(_storm(stack, tokens))
                admin = str(stack.state()["tokens"]["admin"]["token"])
                status.append(
                    status_load(
                        stack.spawner_url,
                        admin,
                        users=users,
                        user_format=USER_FORMAT,
                        seconds=status_seconds,
                    )
                )
            finally:
                stack.stop()
        seconds = [s["seconds"] for s in storms if s["seconds"] is not None]
        rates = [s.get("requests_per_second") or 0.0 for s in status]
        by_count[str(count)] = {
            "storm_seconds_median": median(seconds) if seconds else None,
            "storm_completed": [s["completed"] for s in storms],
            "storm_runs": storms,
            "status_requests_per_second_median": round(median(rates), 1),
            "status_p99_ms": [s.get("latency_ms", {}).get("p99") for s in status],
            "status_non_2xx": sum(int(s.get("non_2xx") or 0) for s in status),
        }
    stack = _stack(workdir / "failover", 3, 0, lease_seconds)
    try:
        admin = str(stack.state()["tokens"]["admin"]["token"])
        moves = [_leader_failover(stack, admin) for _ in range(failovers)]
    finally:
        stack.stop()
    return {
        "users": users,
        "runs": runs,
        "workers_per_replica": 1,
        "lease_seconds": lease_seconds,
        "by_replicas": by_count,
        "leader_failover_seconds": {
            "median": median(moves),
            "max": max(moves),
            "runs": moves,
            "bound": round(lease_seconds * 1.25, 2),
        },
    }

"""Benchmark: a restart with hundreds of labs running, until the lab list is full again.

``labs`` labs are spawned (all at once, by the storm's client), then the service is stopped
and started twice: once with Redis as it was (a rolling restart, a new release), and once
after ``FLUSHALL`` (Redis lost its data: every record is rebuilt from Kubernetes, the
reference implementation's every restart, as it keeps its state in memory). Each is timed
from the start command until ``GET /spawner/v1/labs`` lists every lab, asked every 20 ms
with JupyterHub's admin token, and until ``/readyz`` first says ready. The service's modules
are compiled to bytecode first, as its image compiles them when it is built.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import requests

from app.runtime.defaults import default_workers
from bench.services import BenchStack, StackSettings, compile_service_bytecode, log_findings
from bench.storm import LABS_PER_NODE, run_client

POLL_SECONDS = 0.02
GIVE_UP_SECONDS = 60.0


def _until_listed(bench: BenchStack, labs: int) -> dict[str, Any]:
    """Start the service and time it to ready and to a full list."""
    started = time.monotonic()
    bench.service = bench.start_service(ready_path=None)
    headers = {"Authorization": f"Bearer {bench.admin_token}"}
    ready_at: float | None = None
    listed_at: float | None = None
    answers: dict[int, int] = {}
    with requests.Session() as session:
        while time.monotonic() - started < GIVE_UP_SECONDS:
            try:
                if ready_at is None and session.get(bench.url + "/readyz", timeout=1).ok:
                    ready_at = time.monotonic()
                response = session.get(bench.url + "/spawner/v1/labs", headers=headers, timeout=5)
            except requests.RequestException:
                time.sleep(POLL_SECONDS)
                continue
            answers[response.status_code] = answers.get(response.status_code, 0) + 1
            if response.status_code == 200 and len(response.json()) >= labs:
                listed_at = time.monotonic()
                break
            time.sleep(POLL_SECONDS)
    return {
        "seconds_to_ready": round(ready_at - started, 3) if ready_at is not None else None,
        "seconds_to_full_list": round(listed_at - started, 3) if listed_at is not None else None,
        "list_answers_by_status": answers,
    }


def run(workdir: Path, labs: int = 430, workers: int | None = None) -> dict[str, Any]:
    workers = default_workers() if workers is None else workers
    nodes = max(3, math.ceil(labs / LABS_PER_NODE))
    settings = StackSettings(workers=workers, nodes=nodes, cache_images=True)
    with BenchStack(workdir / "restart", settings) as bench:
        assert bench.service is not None
        names = [f"restart-{index:04d}" for index in range(labs)]
        tokens = bench.add_users(names)
        spawned = run_client(
            bench, {"mode": "spawn", "image": bench.image, "users": list(tokens.items())}
        )
        completed = sum(1 for r in spawned["results"] if r.get("outcome") == "complete")
        results: dict[str, Any] = {"labs": labs, "spawned": completed, "workers": workers}
        # As the image starts: its modules compiled when it was built.
        compile_service_bytecode()
        for name, flush in (("redis_kept", False), ("redis_empty", True)):
            bench.service.stop()
            if flush:
                bench.redis().flushall()
            results[name] = _until_listed(bench, completed)
        results["service_log"] = log_findings(bench.service_log)
        return results

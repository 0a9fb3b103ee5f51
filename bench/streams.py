"""Benchmark 4: how many event streams one gevent worker holds, and how fast it delivers.

Users with an operation in progress are made directly in Redis: a lab record (status
``starting``) through ``LabStore.put_if_idle`` and the operation's first event through
``EventStore.append``, the service's own storage code. No operation record is queued, so
no worker tries to run a spawn for them. The service runs with ONE worker and a high
``worker_connections``; a separate epoll client (``bench.stream_client``) opens one stream
per user with the admin token (as JupyterHub would), then each round appends one event to
every user's stream in a single Redis pipeline and the client timestamps its arrival on
each stream. Latency is from sending the packed pipeline to arrival; a final terminal
event closes every stream.
"""

from __future__ import annotations

import gc
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from app.models.lab import LabRecord, PodState
from app.models.workload import WorkloadStatus
from app.storage.events import EventStore, EventType
from app.workloads.lab.store import LabStore, lab_ref
from bench.services import (
    RECONCILE_OUT_OF_THE_WAY,
    REPO_ROOT_TEXT,
    BenchStack,
    StackSettings,
    cpu_seconds,
    log_findings,
)
from bench.stats import ms, percentile, summary_ms


def _prepare(bench: BenchStack, users: list[str]) -> None:
    client = bench.redis()
    labs = LabStore.reading(client, bench.key_prefix)
    events = EventStore(client, bench.key_prefix)
    for index, user in enumerate(users):
        record = LabRecord(
            username=user,
            status=WorkloadStatus.STARTING,
            pod=PodState.MISSING,
            options={"image": bench.image, "size": "small", "debug": False},
            env={},
            uid=30000 + index,
            gid=30000 + index,
            groups=[{"name": user, "id": 30000 + index}],
            quotas={},
        )
        labs.put_if_idle(record, expect=None)
        events.append(lab_ref(user).key, EventType.INFO, "Lab creation requested")


def _broadcast(
    bench: BenchStack, users: list[str], data: str, kind: EventType
) -> tuple[float, float]:
    """Append one event to every user's stream in one pipeline; (sent, answered) times.

    Each append is the service's own (``EventStore.append``), queued in one pipeline so
    every stream gets its event within the same few milliseconds. The commands are packed
    before the clock starts and the collector is paused while it runs: the benchmark's own
    Python work (2,000 commands packed, a full collection of the emulators' objects, which
    stalled one round in ten by 200 ms) is not the delivery being measured.
    """
    client = bench.redis()
    events = EventStore(client, bench.key_prefix)
    pipe = client.pipeline(transaction=False)
    for user in users:
        events.append(lab_ref(user).key, kind, data, pipe=pipe)
    pipe.load_scripts()
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        packed = connection.pack_commands([args for args, _ in pipe.command_stack])
        gc.disable()
        started = time.monotonic()
        connection.send_packed_command(packed)
        for _ in users:
            connection.read_response()
        answered = time.monotonic()
    finally:
        gc.enable()
        pool.release(connection)
    return started, answered


def _probe(url: str, count: int = 20) -> dict[str, Any]:
    """Latency of ordinary requests while the streams are open."""
    session = requests.Session()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        session.get(f"{url}/healthz", timeout=10)
        times.append(time.perf_counter() - started)
        time.sleep(0.02)
    return summary_ms(times)


def run(
    workdir: Path,
    streams: int = 2000,
    rounds: int = 20,
    interval: float = 1.0,
    worker_connections: int = 4000,
    config_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, streams + 1024))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    settings = StackSettings(
        workers=1,
        worker_connections=worker_connections,
        nodes=1,
        config_overrides={**RECONCILE_OUT_OF_THE_WAY, **(config_overrides or {})},
    )
    with BenchStack(workdir / "streams", settings) as bench:
        assert bench.service is not None
        (worker,) = bench.service.web_worker_pids()
        users = [f"stream-{index:05d}" for index in range(streams)]
        _prepare(bench, users)
        rss_before = bench.service.worker_rss_kib()
        host, _, port = bench.url.removeprefix("http://").partition(":")
        job = {
            "host": host,
            "port": int(port),
            "users": users,
            "token": bench.admin_token,
            "open_timeout": 60,
            "run_timeout": 60 + rounds * interval,
        }
        gafaelfawr_before = sum(bench.stack.gafaelfawr.requests.values())
        client = subprocess.Popen(
            [sys.executable, "-m", "bench.stream_client"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO_ROOT_TEXT,
        )
        assert client.stdin is not None and client.stdout is not None
        client.stdin.write(json.dumps(job).encode())
        client.stdin.close()
        ready = json.loads(client.stdout.readline() or b"{}")
        gafaelfawr_calls = sum(bench.stack.gafaelfawr.requests.values()) - gafaelfawr_before
        time.sleep(1.0)
        rss_open = bench.service.worker_rss_kib()
        cpu_start = cpu_seconds(worker) or 0.0
        time.sleep(3.0)
        idle_cpu = ((cpu_seconds(worker) or 0.0) - cpu_start) / 3.0
        probe = _probe(bench.url)
        sent: dict[str, tuple[float, float]] = {}
        cpu_rounds_start = cpu_seconds(worker) or 0.0
        for number in range(rounds):
            sent[str(number)] = _broadcast(bench, users, f"round-{number}", EventType.INFO)
            time.sleep(interval)
        # The rounds' work, less what the idle streams cost over the same time.
        cpu_per_round = ((cpu_seconds(worker) or 0.0) - cpu_rounds_start) / rounds - (
            idle_cpu * interval
        )
        closing = _broadcast(bench, users, "", EventType.COMPLETE)
        done = json.loads(client.stdout.readline() or b"{}")
        client.wait(timeout=60)
        closed_after = time.monotonic() - closing[0]

        latencies: list[float] = []
        per_round: list[dict[str, Any]] = []
        for label, (started, answered) in sent.items():
            arrivals = done.get("rounds", {}).get(label, [])
            delays = [at - started for at in arrivals]
            latencies.extend(delays)
            per_round.append(
                {
                    "round": int(label),
                    "delivered": len(arrivals),
                    "pipeline_ms": ms(answered - started),
                    "p50_ms": ms(percentile(delays, 0.5)) if delays else None,
                    "p99_ms": ms(percentile(delays, 0.99)) if delays else None,
                    "last_ms": ms(max(delays)) if delays else None,
                }
            )
        expected = ready.get("ready", 0) * rounds
        return {
            "streams_requested": streams,
            "worker_connections": worker_connections,
            "config_overrides": config_overrides or {},
            "open": ready,
            "held_open": ready.get("ready"),
            "gafaelfawr_calls_at_open": gafaelfawr_calls,
            "worker_rss_kib": {
                "before_streams": sorted(rss_before.values()),
                "with_streams_open": sorted(rss_open.values()),
            },
            "rss_per_stream_kib": round(
                (sum(rss_open.values()) - sum(rss_before.values())) / max(1, ready.get("ready", 0)),
                1,
            ),
            "worker_cpu_idle_with_streams": round(idle_cpu, 3),
            "worker_cpu_ms_per_round": ms(cpu_per_round),
            "healthz_while_streams_open": probe,
            "rounds": rounds,
            "deliveries": len(latencies),
            "deliveries_expected": expected,
            "delivery_latency": summary_ms(latencies),
            "per_round": per_round,
            "ended_with_terminal_event": done.get("ended_with_terminal_event"),
            "still_open_at_end": done.get("still_open"),
            "seconds_until_all_closed": round(closed_after, 2),
            "client_errors": done.get("errors"),
            "keepalives_seen": done.get("keepalives"),
            "service_log": log_findings(bench.service_log),
        }

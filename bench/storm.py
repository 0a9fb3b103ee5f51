"""Benchmark 2 (and 5): a spawn storm of distinct users, then a delete storm.

Every user spawns at the same moment through gunicorn; the load client
is a separate gevent process (``bench.storm_client``). Afterwards the cluster and Redis are
checked for duplicates and orphans, everything is deleted at once, and the cluster must end
clean. Worker memory is sampled throughout.
"""

from __future__ import annotations

import json
import math
import re
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from app.runtime.defaults import default_workers
from app.workloads.lab.store import LabStore
from bench.services import (
    REPO_ROOT_TEXT,
    BenchStack,
    StackSettings,
    cpu_seconds,
    distinct_resident_kib,
    log_findings,
)
from bench.stats import summary_ms

LABS_PER_NODE = 25
"""Nodes allot 7.8 CPUs and a small lab requests 0.25: 31 fit; keep some room."""


class RssSampler:
    """Samples the RSS of gunicorn's workers, and the service's total RSS and PSS, every
    ``interval`` seconds in a thread; and every ``distinct_every`` samples, its pages each
    counted once (``distinct``, when this process may read page frames), which costs more
    CPU in the benchmark's process, where the emulators run."""

    def __init__(self, bench: BenchStack, interval: float = 0.25, distinct_every: int = 4) -> None:
        self._bench = bench
        self._interval = interval
        self._distinct_every = distinct_every
        self._stop = threading.Event()
        self.peak: dict[int, int] = {}
        self.peak_total: dict[str, int] = {"rss": 0, "pss": 0}
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        service = self._bench.service
        assert service is not None
        samples = 0
        while not self._stop.is_set():
            for pid, kib in service.worker_rss_kib().items():
                self.peak[pid] = max(self.peak.get(pid, 0), kib)
            for name, kib in service.total_memory_kib().items():
                self.peak_total[name] = max(self.peak_total[name], kib)
            if samples % self._distinct_every == 0:
                distinct = distinct_resident_kib(service.pids())
                if distinct is not None:
                    self.peak_total["distinct"] = max(self.peak_total.get("distinct", 0), distinct)
            samples += 1
            self._stop.wait(self._interval)


def cpu_by_part(bench: BenchStack) -> dict[str, float]:
    """CPU seconds used so far by each part of the system."""
    assert bench.service is not None
    workers = sum(cpu_seconds(pid) or 0.0 for pid in bench.service.worker_pids())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    info = bench.redis().info("cpu")
    return {
        "service_workers": workers,
        "emulators_and_bench": usage.ru_utime + usage.ru_stime,
        "redis": float(info["used_cpu_user"]) + float(info["used_cpu_sys"]),
    }


def redis_commands(bench: BenchStack) -> dict[str, int]:
    """Calls per Redis command so far (``INFO commandstats``)."""
    stats = bench.redis().info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def command_delta(before: dict[str, int], after: dict[str, int], per: int) -> dict[str, float]:
    """Commands issued between two snapshots, per unit of work (spawn, request...)."""
    diff = {name: after[name] - before.get(name, 0) for name in after}
    ordered = sorted(diff.items(), key=lambda item: -item[1])
    return {name: round(count / per, 2) for name, count in ordered if count}


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {key: round(after[key] - before[key], 2) for key in before}


def run_client(
    bench: BenchStack, job: dict[str, Any], module: str = "bench.storm_client"
) -> dict[str, Any]:
    """Run a load client (``module``, by default the storm's) on ``job`` in its own process;
    its output with the client's CPU seconds and wall time added."""
    host, _, port = bench.url.removeprefix("http://").partition(":")
    job = {"host": host, "port": int(port), "timeout": 300, **job}
    started = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    completed = subprocess.run(
        [sys.executable, "-m", module],
        input=json.dumps(job).encode(),
        capture_output=True,
        cwd=REPO_ROOT_TEXT,
        timeout=600,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{module} failed: {completed.stderr.decode()[-2000:]}")
    output: dict[str, Any] = json.loads(completed.stdout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    output["client_cpu_seconds"] = round(
        after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2
    )
    output["wall_seconds"] = time.monotonic() - started
    return output


def _reason(message: str) -> str:
    """A failure message with its numbers (ports, timeouts) blanked, so alike ones group."""
    return re.sub(r"\d+(\.\d+)?", "N", message)[:200]


def _summarize(output: dict[str, Any]) -> dict[str, Any]:
    results = output["results"]
    started = output["started_at"]
    done = [r for r in results if r.get("outcome") == "complete"]
    outcomes = Counter(
        "complete" if r.get("outcome") == "complete" else _reason(str(r.get("outcome")))
        for r in results
    )
    finished = [r["done_at"] for r in results if "done_at" in r]
    return {
        "users": len(results),
        "completed": len(done),
        "failed": len(results) - len(done),
        "outcomes": dict(outcomes.most_common(10)),
        "total_seconds": round(max(finished) - started, 2) if finished else None,
        "per_user": summary_ms([r["done_seconds"] for r in done]),
        "request_answered": summary_ms(
            [r["request_seconds"] for r in results if "request_seconds" in r]
        ),
        "error_events": sum(len(r.get("errors") or []) for r in results),
        "client_cpu_seconds": output["client_cpu_seconds"],
    }


def _integrity(bench: BenchStack, users: list[str]) -> dict[str, Any]:
    """Exactly one pod per user, and nothing of ours without a lab record."""
    labs = LabStore.reading(bench.redis(), bench.key_prefix)
    prefix = f"{bench.namespace_prefix}-"
    records = {user: labs.get(user) for user in labs.usernames()}
    statuses = Counter(str(r.status.value) if r else "none" for r in records.values())
    pods_by_ns: Counter[str] = Counter(ns for ns, _ in bench.lab_pods())
    namespaces = set(bench.lab_namespaces())
    recorded_ns = {f"{prefix}{user}" for user in records}
    duplicates = sorted(ns for ns, count in pods_by_ns.items() if count > 1)
    missing_pods = sorted(u for u in users if pods_by_ns.get(f"{prefix}{u}", 0) == 0)
    return {
        "lab_records": len(records),
        "record_statuses": dict(statuses),
        "namespaces": len(namespaces),
        "pods": sum(pods_by_ns.values()),
        "users_with_duplicate_pods": len(duplicates),
        "users_without_pod": len(missing_pods),
        "orphan_namespaces": sorted(namespaces - recorded_ns)[:10],
        "orphan_namespace_count": len(namespaces - recorded_ns),
        "orphan_pods": sum(c for ns, c in pods_by_ns.items() if ns not in recorded_ns),
        "pending_operations": len(labs.workloads.pending()),
    }


def _wait_clean(bench: BenchStack, timeout: float = 60.0) -> dict[str, Any]:
    labs = LabStore.reading(bench.redis(), bench.key_prefix)
    started = time.monotonic()
    while True:
        state: dict[str, Any] = {
            "namespaces": len(bench.lab_namespaces()),
            "pods": len(bench.lab_pods()),
            "lab_records": len(labs.usernames()),
            "pending_operations": len(labs.workloads.pending()),
        }
        if not any(state.values()) or time.monotonic() - started > timeout:
            state["clean"] = not any(state.values())
            state["seconds_until_clean"] = round(time.monotonic() - started, 2)
            return state
        time.sleep(0.2)


def run(
    workdir: Path,
    users: int = 500,
    api_latency: float = 0.0,
    start_seconds: float = 0.0,
    workers: int | None = None,
) -> dict[str, Any]:
    """``api_latency``: seconds each Kubernetes call waits, as on a real control plane;
    ``start_seconds``: the kubelet's time to start a lab."""
    workers = default_workers() if workers is None else workers
    nodes = max(3, math.ceil(users / LABS_PER_NODE))
    settings = StackSettings(
        workers=workers,
        nodes=nodes,
        pull_seconds=0.0,
        cache_images=True,
        api_latency=api_latency,
        start_seconds=start_seconds,
    )
    name = f"storm-{api_latency * 1000:g}ms-{start_seconds:g}s"
    with BenchStack(workdir / name, settings) as bench:
        assert bench.service is not None
        names = [f"storm-{index:04d}" for index in range(users)]
        tokens = bench.add_users(names)
        rss_at_rest = bench.service.worker_rss_kib()
        memory_at_rest = bench.service.total_memory_kib()
        audit = bench.stack.kube.audit
        audit.clear()
        cpu_before = cpu_by_part(bench)
        commands_before = redis_commands(bench)
        with RssSampler(bench) as sampler:
            spawned = run_client(
                bench,
                {"mode": "spawn", "image": bench.image, "users": list(tokens.items())},
            )
        cpu_spawn = _delta(cpu_before, cpu_by_part(bench))
        commands = command_delta(commands_before, redis_commands(bench), users)
        rss_after_storm = bench.service.worker_rss_kib()
        calls = Counter(f"{e.verb} {e.resource}" for e in audit.entries())
        integrity = _integrity(bench, names)

        audit.clear()
        cpu_before = cpu_by_part(bench)
        with RssSampler(bench) as delete_sampler:
            deleted = run_client(
                bench,
                {
                    "mode": "delete",
                    "admin_token": bench.admin_token,
                    "users": [[user, ""] for user in names],
                },
            )
        cpu_delete = _delta(cpu_before, cpu_by_part(bench))
        clean = _wait_clean(bench)
        return {
            "users": users,
            "api_latency_ms": api_latency * 1000,
            "workers": workers,
            # The runner is one process of its own (``runner.py``), beside the web workers.
            "runner_process": True,
            "nodes": nodes,
            "spawn": _summarize(spawned),
            "spawn_cpu_seconds": cpu_spawn,
            "redis_commands_per_spawn": commands,
            "kubernetes_calls": sum(calls.values()),
            "kubernetes_calls_by_kind": dict(calls.most_common()),
            "integrity_after_spawn": integrity,
            "delete": _summarize(deleted),
            "delete_cpu_seconds": cpu_delete,
            "after_delete": clean,
            "worker_rss_kib": {
                "at_rest": sorted(rss_at_rest.values()),
                "peak_during_spawn_storm": sorted(sampler.peak.values()),
                "after_spawn_storm": sorted(rss_after_storm.values()),
                "peak_during_delete_storm": sorted(delete_sampler.peak.values()),
                "after_delete": sorted(bench.service.worker_rss_kib().values()),
            },
            "service_memory_kib": {
                "at_rest": memory_at_rest,
                "peak_during_spawn_storm": sampler.peak_total,
            },
            "service_log": log_findings(bench.service_log),
        }

"""Benchmark 1: spawn latency with an instant kubelet, next to the emulator's floor.

One user spawns and deletes a lab ``spawns`` times in a row through gunicorn, from a
client in a process of its own (``bench.latency_client``), as JupyterHub is.
Latency is from sending the POST to parsing the ``complete`` event of the stream. The
nodes already hold every configured image, and a warm-up spawn lands one lab on each node
first, so nothing is pulled and every process has its connections open.

The floor is one reference spawn's calls replayed (``bench.floor``), once after each timed
spawn: on a shared 2-core machine the floor itself moved by half between runs minutes
apart, so a ratio is only meaningful between samples taken side by side. The timing
client's process replays it, a process of its own as the service's workers are.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from app.runtime.defaults import default_workers
from bench.client import SpawnerClient
from bench.floor import Call, Replay, capture_objects
from bench.services import REPO_ROOT_TEXT, BenchStack, StackSettings, log_findings
from bench.stats import median, ms, summary_ms

USER = "bench-latency"
SERVICE_NAMESPACE = "nublado"


def _spawn_entries(entries: list[Any], namespace: str, start: float, end: float) -> list[Any]:
    """The audited calls of one spawn: those about its namespace or the copied Secret."""
    found = []
    for entry in entries:
        if not start <= entry.timestamp <= end:
            continue
        about_lab = entry.namespace == namespace or (
            entry.resource == "namespaces"
            and (entry.name == namespace or (entry.verb == "create" and not entry.name))
        )
        copied_secret = entry.resource == "secrets" and entry.namespace == SERVICE_NAMESPACE
        if about_lab or copied_secret:
            found.append(entry)
    return found


def _spawn_calls(entries: list[Any], namespace: str, start: float, end: float) -> list[Call]:
    return [Call.from_audit(e) for e in _spawn_entries(entries, namespace, start, end)]


def _terminating_seconds(
    entries: list[Any], removed: list[tuple[str, float]], namespace: str, record: dict[str, Any]
) -> float | None:
    """How long the emulator kept this delete's namespace terminating: from its answer to
    the namespace DELETE to the namespace's removal, both within the delete's wall time."""
    start, end = record["delete_wall_start"], record["delete_wall_end"]
    answered = next(
        (
            e.timestamp
            for e in entries
            if e.verb == "delete"
            and e.resource == "namespaces"
            and e.name == namespace
            and start <= e.timestamp <= end
        ),
        None,
    )
    gone = next((t for name, t in removed if name == namespace and start <= t <= end), None)
    return None if answered is None or gone is None else gone - answered


def _warm_up(bench: BenchStack, client: SpawnerClient, tokens: dict[str, str]) -> dict[str, Any]:
    """Spawn one lab per node at once (the scheduler spreads them), then delete them all."""

    def spawn(user: str) -> str:
        client_ = SpawnerClient(bench.url, bench.admin_token)
        response = client_.spawn(user, tokens[user], bench.image)
        if response.status_code != 303:
            return f"http-{response.status_code}"
        return client_.follow(user, tokens[user]).kind

    with ThreadPoolExecutor(len(tokens)) as pool:
        outcomes = dict(zip(tokens, pool.map(spawn, tokens), strict=True))
    nodes = sorted(
        str((pod.get("spec") or {}).get("nodeName"))
        for pod in bench.stack.kube.store.list("pods")
        if pod["metadata"]["namespace"].startswith(f"{bench.namespace_prefix}-")
    )
    for user in tokens:
        client.delete(user)
    for user in tokens:
        client.follow(user, tokens[user])
    return {"outcomes": outcomes, "nodes": nodes}


class _TimingClient:
    """``bench.latency_client`` in a process of its own, one command at a time."""

    def __init__(self, job: dict[str, Any]) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.latency_client"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO_ROOT_TEXT,
            text=True,
        )
        self._send(json.dumps(job))

    def _send(self, line: str) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()

    def ask(self, command: str) -> dict[str, Any]:
        self._send(command)
        assert self._process.stdout is not None
        answer = self._process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the timing client stopped (exit {self._process.poll()})")
        result: dict[str, Any] = json.loads(answer)
        return result

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def _wait_namespace_gone(bench: BenchStack, namespace: str, timeout: float = 30.0) -> None:
    """Until the emulator has removed ``namespace`` (its controller works in the
    background), so a replay's clean-up never overlaps the next spawn."""
    deadline = time.monotonic() + timeout
    store = bench.stack.kube.store
    while store.get("namespaces", None, namespace) is not None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"namespace {namespace} was not removed in {timeout:g} s")
        time.sleep(0.002)


def run(
    workdir: Path,
    spawns: int = 50,
    api_latency: float = 0.0,
    start_seconds: float = 0.0,
    workers: int | None = None,
) -> dict[str, Any]:
    """``api_latency``: seconds each Kubernetes call waits, as on a real control plane;
    ``start_seconds``: the kubelet's time to start a lab's containers."""
    workers = default_workers() if workers is None else workers
    settings = StackSettings(
        workers=workers,
        nodes=3,
        pull_seconds=0.0,
        start_seconds=start_seconds,
        api_latency=api_latency,
        cache_images=True,
    )
    where = f"latency-{api_latency * 1000:g}ms-{start_seconds:g}s"
    with BenchStack(workdir / where, settings) as bench:
        warm_users = [USER] + [f"bench-warm-{i}" for i in range(2, bench.settings.nodes + 1)]
        tokens = bench.add_users(warm_users)
        client = SpawnerClient(bench.url, bench.admin_token)
        warm = _warm_up(bench, client, tokens)
        assert bench.service is not None
        rss_at_rest = bench.service.worker_rss_kib()

        audit = bench.stack.kube.audit
        namespace = f"{bench.namespace_prefix}-{USER}"
        timing = _TimingClient(
            {
                "url": bench.url,
                "admin_token": bench.admin_token,
                "user": USER,
                "token": tokens[USER],
                "image": bench.image,
                "kube_url": bench.stack.kube.url,
                "kube_ca": str(bench.stack.kube.authority.ca_path),
            }
        )
        try:
            # The spawn the floor replays: its calls, and the objects it left running.
            reference_calls = _reference_spawn(bench, timing, client, tokens[USER], namespace)
            if isinstance(reference_calls, str):
                return {"error": reference_calls}
            replay_calls, replay_objects = reference_calls
            timing.ask(
                "reference "
                + json.dumps(
                    {
                        "calls": [dataclasses.asdict(call) for call in replay_calls],
                        "objects": replay_objects,
                        "namespace": namespace,
                    }
                )
            )
            # One untimed replay, so the client's connection and caches are warm.
            _replay(bench, timing, "benchfloor-warm")
            # Spawns and replays take turns: both sample the machine in the same state.
            audit.clear()
            timed: list[dict[str, Any]] = []
            replays: list[Replay] = []
            for index in range(spawns):
                timed.append(timing.ask("spawn"))
                replays.append(_replay(bench, timing, f"benchfloor-{index}"))
        finally:
            timing.close()
        entries = audit.entries()
        removed = bench.stack.kube.cluster.namespaces_removed()
        latencies: list[float] = []
        deletes: list[float] = []
        terminating: list[float] = []
        phases: dict[str, list[float]] = {
            "post_answered": [],
            "until_first_kubernetes_call": [],
            "kubernetes_span": [],
            "after_last_kubernetes_call": [],
        }
        call_counts: list[int] = []
        sequences: Counter[tuple[str, ...]] = Counter()
        failures: Counter[str] = Counter()
        for record in timed:
            kind = record["kind"]
            if kind != "complete":
                failures[kind] += 1
                continue
            latencies.append(record["seconds"])
            wall_start, wall_end = record["wall_start"], record["wall_end"]
            spawn_entries = _spawn_entries(entries, namespace, wall_start, wall_end)
            calls = [Call.from_audit(e) for e in spawn_entries]
            stamps = [e.timestamp for e in spawn_entries]
            if stamps:
                # Both clocks started together: wall time of an event = wall_start + offset.
                finished_wall = wall_start + record["seconds"]
                phases["post_answered"].append(record["post_seconds"])
                phases["until_first_kubernetes_call"].append(min(stamps) - wall_start)
                phases["kubernetes_span"].append(max(stamps) - min(stamps))
                phases["after_last_kubernetes_call"].append(finished_wall - max(stamps))
            call_counts.append(len(calls))
            sequences[tuple(c.label() for c in calls)] += 1
            if "delete_kind" in record:
                if record["delete_kind"] == "complete":
                    deletes.append(record["delete_seconds"])
                    held = _terminating_seconds(entries, removed, namespace, record)
                    if held is not None:
                        terminating.append(held)
                else:
                    failures[f"delete-{record['delete_kind']}"] += 1

        floor = _floor(replay_calls, replays)
        p50 = median(latencies) if latencies else float("nan")
        typical = sequences.most_common(1)[0][0] if sequences else ()
        return {
            "spawns": spawns,
            "workers": workers,
            "api_latency_ms": api_latency * 1000,
            "kubelet_start_seconds": start_seconds,
            "completed": len(latencies),
            "failures": dict(failures),
            "latency": summary_ms(latencies),
            "delete_latency": summary_ms(deletes),
            # A delete ends when the namespace is gone; the emulator keeps it terminating
            # this long first, as a real cluster takes seconds emptying one.
            "namespace_termination_ms": round(
                bench.stack.kube.cluster.settings.namespace_termination_seconds * 1000, 1
            ),
            # Measured per delete: from the emulator's answer to the namespace DELETE to its
            # removal (the hold above, the timer's lateness and emptying the namespace).
            "namespace_terminating_measured": summary_ms(terminating),
            # Each delete less its own namespace's measured terminating time: the service's
            # share (the request, the calls before the DELETE, noticing it gone, the event).
            "delete_service_share": summary_ms(
                [d - t for d, t in zip(deletes, terminating, strict=True)]
                if len(terminating) == len(deletes)
                else []
            ),
            "calls_per_spawn": {
                "median": median(call_counts) if call_counts else None,
                "min": min(call_counts, default=None),
                "max": max(call_counts, default=None),
                # Spawns by their number of calls: 10 when the pod was ready at the first
                # look, more when it had to be watched.
                "spawns_by_count": {
                    str(count): spawns for count, spawns in sorted(Counter(call_counts).items())
                },
            },
            "typical_calls": list(typical),
            "distinct_call_sequences": len(sequences),
            "phases": {name: summary_ms(values) for name, values in phases.items()},
            "floor": floor,
            "ratio_p50_to_floor": round(p50 / floor["api_seconds_median"], 2)
            if floor.get("api_seconds_median")
            else None,
            "warm_up": warm,
            "worker_rss_kib_at_rest": sorted(rss_at_rest.values()),
            "service_log": log_findings(bench.service_log),
        }


REFERENCE_ATTEMPTS = 5


def _reference_spawn(
    bench: BenchStack,
    timing: _TimingClient,
    client: SpawnerClient,
    token: str,
    namespace: str,
) -> tuple[list[Call], dict[str, list[dict[str, Any]]]] | str:
    """The calls of a usual spawn, and the objects it made, for the floor to replay.

    Usual means the pod was ready at the spawn's first look, as an instant kubelet almost
    always has it. Now and then the kubelet's thread has not run yet, and that spawn also
    lists Events and watches the pod: a floor of those calls would be a larger floor than
    the spawns typically meet. Up to ``REFERENCE_ATTEMPTS`` spawns are made to find one;
    an error message if none ended well.
    """
    audit = bench.stack.kube.audit
    found: tuple[list[Call], dict[str, list[dict[str, Any]]]] | None = None
    for _ in range(REFERENCE_ATTEMPTS):
        audit.clear()
        reference = timing.ask("spawn-keep")
        if reference.get("kind") != "complete":
            return f"the reference spawn ended {reference.get('kind')}"
        calls = _spawn_calls(
            audit.entries(), namespace, reference["wall_start"], reference["wall_end"]
        )
        found = (calls, capture_objects(bench.stack.kube.store, namespace))
        client.delete(USER)
        client.follow(USER, token)
        if not any(call.verb == "watch" for call in calls):
            break
    assert found is not None
    return found


def _replay(bench: BenchStack, timing: _TimingClient, target: str) -> Replay:
    """One replay of the reference spawn into ``target`` by the timing client's process,
    cleaned up before returning."""
    answer = timing.ask(f"replay {target}")
    _wait_namespace_gone(bench, target)
    return Replay(
        calls=[(label, seconds) for label, seconds in answer["calls"]],
        watch_seconds=answer["watch_seconds"],
    )


def _floor(calls: list[Call], results: list[Replay]) -> dict[str, Any]:
    if not calls or not results:
        return {"error": "no spawn to replay"}
    per_call: list[dict[str, Any]] = []
    for position, call in enumerate(calls):
        samples = [r.calls[position][1] for r in results]
        per_call.append({"call": call.label(), "median_ms": ms(median(samples))})
    api = [r.api_seconds for r in results]
    watch = [r.watch_seconds for r in results]
    return {
        "calls": len(calls),
        "replays": len(results),
        "api_seconds_median": median(api),
        "api_ms": summary_ms(api),
        "watch_ms_median": ms(median(watch)),
        "per_call": per_call,
    }

"""Benchmark: compute clusters of many users at once: create, scale up, scale down, delete.

Every user first has a running lab (spawned all at once by the storm's client; not
measured), since a cluster lives in its owner's lab namespace. Then, each phase released
at one moment for all users by a gevent client in its own process (``bench.clusters_client``):

- **create**: every user POSTs one Dask cluster (1 worker, at most ``max_workers``) and reads
  it until it is ``running``;
- **scale up**, then **scale down**: every user PATCHes the scaler's route to
  ``max_workers``, then to 1; done when the emulator's store holds exactly that many running
  worker pods of every cluster, as a listener on the store sees each change committed;
- **delete**: every user DELETEs the cluster and reads their list until it is gone.

Each user's budget allows exactly one cluster of ``max_workers`` workers, and the emulator has
nodes enough for every lab and every cluster at its largest, so a refusal or a pod left
pending is the service's doing, not the set-up's. The Kubernetes calls of each phase are
read from the emulator's audit log, which records HTTP requests only: the simulated
operators, scheduler and kubelet write to its store directly, so they never appear there.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from app.runtime.defaults import default_workers
from app.storage.kubernetes_client import USER_AGENT
from app.workloads.cluster.adapters import CLUSTER_LABEL, ROLE_LABEL
from bench.services import BenchStack, StackSettings, log_findings
from bench.stats import summary_ms
from bench.storm import LABS_PER_NODE, command_delta, cpu_by_part, redis_commands, run_client
from devstack.kube.audit import AuditEntry
from devstack.kube.store import Change, Store

KIND = "daskclusters"
CLIENT = "bench.clusters_client"
TIER_CORES = 1.0
TIER_MEMORY_GIB = 2
"""What the demo configuration's first (default) tier, ``small``, requests for each pod of
a cluster, its head as its workers: the budget is made of them (a change there shows as
creates refused, not as a quietly different benchmark)."""
CLUSTER_PODS_PER_NODE = 6
"""Cluster pods given room on each node. A node allots 7.8 cores
(``devstack.kube.cluster.nodes``): 7 pods of 1 core would fit beside a lab or two (0.25
each), but the scheduler spreads pods as it likes, so keep one pod's room spare everywhere."""
SETTLE_SECONDS = 1.0
"""After a phase, how long its late calls (the watcher's, reacting to the pods it changed)
are still counted as the phase's before the next phase begins."""
PHASE_SECONDS = 120.0
"""How long the pods of a scale may take to reach their count before the phase is given up."""


def budget(max_workers: int) -> dict[str, Any]:
    """Each user's budget: one cluster of up to ``max_workers`` workers of the default tier,
    with its head, and not a core or a byte more, so the budget is checked at its limit."""
    pods = max_workers + 1
    return {
        "default": {
            "clusters": 1,
            "workers": max_workers,
            "cpu": pods * TIER_CORES,
            "memory": f"{pods * TIER_MEMORY_GIB}Gi",
            "gpus": 0,
        },
        "groups": [],
    }


def nodes_for(users: int, max_workers: int) -> int:
    """Nodes for every lab and every cluster at its largest, with room to spare."""
    cluster_nodes = math.ceil(users * (max_workers + 1) / CLUSTER_PODS_PER_NODE)
    return max(3, cluster_nodes + math.ceil(users / LABS_PER_NODE))


class ClusterPods:
    """Every cluster's pods in the emulator's store, followed change by change.

    A listener on the store (run by whichever thread commits a change) keeps, per cluster,
    its live worker pods and whether each is running, and notes when its head first runs.
    Once ``expect`` names a count, the first moment a cluster has exactly that many worker
    pods is noted in ``counted``, and the first moment they all run in ``reached``
    (``time.monotonic``: one clock for every process on the machine, the client's too).
    The two apart tell the operator's share (making the pods) from the scheduler's and
    kubelet's (running them). Following changes rather than listing the store keeps the
    measurement exact and cheap: a list of a few hundred pods every few milliseconds would
    compete with the emulator for its interpreter.
    """

    def __init__(self, store: Store, namespaces: set[str]) -> None:
        self._namespaces = namespaces
        self._lock = threading.Lock()
        self._pods: dict[str, dict[str, bool]] = {}
        self._target: int | None = None
        self._waiting: set[str] = set()
        self.head_running: dict[str, float] = {}
        self.counted: dict[str, float] = {}
        self.reached: dict[str, float] = {}
        self._all_reached = threading.Event()
        self._unsubscribe = store.subscribe_changes(self._on_change)

    def close(self) -> None:
        self._unsubscribe()

    def _on_change(self, change: Change) -> None:
        if change.resource != "pods":
            return
        meta = change.object.get("metadata") or {}
        labels = meta.get("labels") or {}
        role = labels.get(ROLE_LABEL)
        if role not in ("head", "worker") or meta.get("namespace") not in self._namespaces:
            return
        key = f"{meta.get('namespace')}/{labels.get(CLUSTER_LABEL)}"
        running = (change.object.get("status") or {}).get("phase") == "Running"
        with self._lock:
            if role == "head":
                if running and change.type != "DELETED":
                    self.head_running.setdefault(key, time.monotonic())
                return
            pods = self._pods.setdefault(key, {})
            if change.type == "DELETED" or meta.get("deletionTimestamp"):
                pods.pop(str(meta.get("name")), None)
            else:
                pods[str(meta.get("name"))] = running
            self._check(key)

    def _check(self, key: str) -> None:
        """Note ``key`` as reached if it has the expected count, all running (lock held)."""
        if key not in self._waiting or key in self.reached:
            return
        pods = self._pods.get(key, {})
        if len(pods) == self._target and key not in self.counted:
            self.counted[key] = time.monotonic()
        if len(pods) == self._target and all(pods.values()):
            self.reached[key] = time.monotonic()
            if self._waiting <= self.reached.keys():
                self._all_reached.set()

    def counts(self) -> Counter[int]:
        """How many clusters have how many live worker pods."""
        with self._lock:
            return Counter(len(pods) for pods in self._pods.values())

    def expect(self, target: int, clusters: list[str]) -> None:
        """From now, note when each of ``clusters`` (``namespace/name``) has ``target``."""
        with self._lock:
            self._target = target
            self._waiting = set(clusters)
            self.counted = {}
            self.reached = {}
            self._all_reached.clear()
            if not self._waiting:
                self._all_reached.set()

    def wait(self, timeout: float) -> bool:
        return self._all_reached.wait(timeout)


def _outcomes(results: list[dict[str, Any]]) -> dict[str, int]:
    return dict(Counter(str(r.get("outcome")) for r in results).most_common(10))


def _statuses(results: list[dict[str, Any]]) -> dict[str, int]:
    return dict(Counter(str(r.get("request_status")) for r in results).most_common())


def _requests(results: list[dict[str, Any]]) -> dict[str, float | int]:
    return summary_ms([r["request_seconds"] for r in results if "request_seconds" in r])


def _client_load(output: dict[str, Any]) -> dict[str, Any]:
    return {
        "reads": sum(int(r.get("reads") or 0) for r in output["results"]),
        "client_cpu_seconds": output["client_cpu_seconds"],
    }


def _call_name(entry: AuditEntry) -> str:
    resource = f"{entry.resource}/{entry.subresource}" if entry.subresource else entry.resource
    return f"{entry.verb} {resource or entry.path}"


def kubernetes_calls(entries: list[AuditEntry], namespaces: set[str], per: int) -> dict[str, Any]:
    """The service's calls in the users' namespaces per cluster, by verb and resource; its
    calls elsewhere (watches, reconciles, the prepuller: not any one cluster's) as counts;
    and the user agents of every call, which show whether anything but the service called."""
    service = [e for e in entries if e.user_agent == USER_AGENT]
    mine = [e for e in service if e.namespace in namespaces]
    by_call = Counter(_call_name(e) for e in mine)
    by_namespace = Counter(e.namespace for e in mine)
    spread = [by_namespace.get(ns, 0) for ns in namespaces]
    return {
        "per_cluster": {
            name: round(count / max(1, per), 2) for name, count in sorted(by_call.items())
        },
        "total_per_cluster": round(len(mine) / max(1, per), 2),
        "spread_per_cluster": {
            "min": min(spread, default=0),
            "median": statistics.median(spread) if spread else 0,
            "max": max(spread, default=0),
        },
        "elsewhere": dict(
            Counter(_call_name(e) for e in service if e.namespace not in namespaces).most_common()
        ),
        "user_agents": dict(Counter(e.user_agent for e in entries).most_common()),
        "errors": dict(Counter(f"{_call_name(e)} {e.code}" for e in mine if e.code >= 400)),
    }


def timeline(entries: list[AuditEntry], namespaces: set[str], started: float) -> dict[str, Any]:
    """When the service made each kind of call in the users' namespaces: seconds from the
    moment the phase's requests were released to the first and the last answered."""
    times: dict[str, list[float]] = {}
    for entry in entries:
        if entry.user_agent == USER_AGENT and entry.namespace in namespaces:
            times.setdefault(_call_name(entry), []).append(entry.timestamp - started)
    return {
        name: [round(min(values), 3), round(max(values), 3)]
        for name, values in sorted(times.items())
    }


def census(bench: BenchStack, namespaces: set[str]) -> dict[str, Any]:
    """What the emulator holds of the users' clusters: objects, head and worker pods, and
    pods not running (a pending one would mean the nodes were too few)."""
    store = bench.stack.kube.store
    objects = [o for o in store.list(KIND) if o["metadata"].get("namespace") in namespaces]
    pods = [
        p
        for p in store.list("pods")
        if p["metadata"].get("namespace") in namespaces
        and (p["metadata"].get("labels") or {}).get(CLUSTER_LABEL)
    ]
    roles = Counter((p["metadata"].get("labels") or {}).get(ROLE_LABEL) for p in pods)
    phases = Counter((p.get("status") or {}).get("phase") or "none" for p in pods)
    return {
        "cluster_objects": len(objects),
        "head_pods": roles.get("head", 0),
        "worker_pods": roles.get("worker", 0),
        "pods_by_phase": dict(phases),
    }


def _last(times: list[float], started: float, expected: int) -> float | None:
    """Seconds from ``started`` to the last of ``times``, if all ``expected`` are there."""
    if not times or len(times) < expected:
        return None
    return round(max(times) - started, 3)


class Phases:
    """Runs the phases against one stack, each timed by its client and counted in the
    audit log from its start to its end and a settling second."""

    def __init__(
        self,
        bench: BenchStack,
        tokens: dict[str, str],
        namespaces: set[str],
        poll_seconds: float,
    ) -> None:
        self.bench = bench
        self.tokens = tokens
        self.namespaces = namespaces
        self.poll_seconds = poll_seconds
        self.pods = ClusterPods(bench.stack.kube.store, namespaces)
        self.calls: dict[str, dict[str, Any]] = {}
        self.census: dict[str, dict[str, Any]] = {}
        self.cost: dict[str, dict[str, Any]] = {}
        self._cpu_before: dict[str, float] = {}
        self._redis_before: dict[str, int] = {}

    def close(self) -> None:
        self.pods.close()

    def _run(self, job: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
        self.bench.stack.kube.audit.clear()
        self._cpu_before = cpu_by_part(self.bench)
        self._redis_before = redis_commands(self.bench)
        users = [[user, self.tokens[user], names.get(user, "")] for user in sorted(names)]
        job = {"kind": KIND, "poll_seconds": self.poll_seconds, "users": users, **job}
        return run_client(self.bench, job, module=CLIENT)

    def _count(self, phase: str, output: dict[str, Any], status: int) -> None:
        """The phase's Kubernetes calls, Redis commands and CPU, per cluster it acted on (its
        requests answered ``status``), and when its calls were made."""
        time.sleep(SETTLE_SECONDS)
        entries = self.bench.stack.kube.audit.entries()
        acted = max(1, sum(1 for r in output["results"] if r.get("request_status") == status))
        self.calls[phase] = kubernetes_calls(entries, self.namespaces, acted)
        self.calls[phase]["timeline_seconds"] = timeline(
            entries, self.namespaces, output["started_wall"]
        )
        self.census[phase] = census(self.bench, self.namespaces)
        cpu = cpu_by_part(self.bench)
        self.cost[phase] = {
            "cpu_ms_per_cluster": {
                part: round((cpu[part] - self._cpu_before[part]) * 1000 / acted, 1) for part in cpu
            },
            "redis_commands_per_cluster": command_delta(
                self._redis_before, redis_commands(self.bench), acted
            ),
        }

    def create(self, users: list[str], workers: int, max_workers: int) -> dict[str, Any]:
        job = {"mode": "create", "workers": workers, "max_workers": max_workers}
        output = self._run(job, {user: "" for user in users})
        results = output["results"]
        running = [r for r in results if r.get("outcome") == "running"]
        started = output["started_at"]
        heads = list(self.pods.head_running.values())
        self._count("create", output, 201)
        return {
            "clusters": len(results),
            "request_statuses": _statuses(results),
            "outcomes": _outcomes(results),
            "running": len(running),
            "all_running_seconds": _last([r["done_at"] for r in running], started, len(results)),
            "post_answered": _requests(results),
            "time_to_running": summary_ms([r["done_seconds"] for r in running]),
            "all_heads_running_in_emulator_seconds": _last(heads, started, len(results)),
            "head_running_in_emulator": summary_ms([t - started for t in heads]),
            "names": {r["user"]: r["name"] for r in running},
            **_client_load(output),
        }

    def scale(self, names: dict[str, str], replicas: int) -> dict[str, Any]:
        clusters = [f"{self._namespace(user)}/{name}" for user, name in names.items()]
        self.pods.expect(replicas, clusters)
        output = self._run({"mode": "scale", "replicas": replicas}, names)
        results = output["results"]
        started = output["started_at"]
        self.pods.wait(PHASE_SECONDS)
        counted, reached = list(self.pods.counted.values()), list(self.pods.reached.values())
        self._count("scale_up" if replicas > 1 else "scale_down", output, 200)
        return {
            "replicas": replicas,
            "request_statuses": _statuses(results),
            "outcomes": _outcomes(results),
            "request": _requests(results),
            "all_answered_seconds": _last(
                [r["done_at"] for r in results if "done_at" in r], started, len(results)
            ),
            "clusters_at_count": len(reached),
            "pods_made_seconds": _last(counted, started, len(clusters)),
            "pods_at_count_seconds": _last(reached, started, len(clusters)),
            "per_cluster_pods_at_count": summary_ms([t - started for t in reached]),
            "worker_pods_per_cluster": {str(k): v for k, v in sorted(self.pods.counts().items())},
            **_client_load(output),
        }

    def delete(self, names: dict[str, str]) -> dict[str, Any]:
        output = self._run({"mode": "delete"}, names)
        results = output["results"]
        unlisted = [r for r in results if r.get("outcome") == "unlisted"]
        started = output["started_at"]
        self._count("delete", output, 202)
        return {
            "request_statuses": _statuses(results),
            "outcomes": _outcomes(results),
            "request": _requests(results),
            "unlisted": len(unlisted),
            "all_unlisted_seconds": _last([r["done_at"] for r in unlisted], started, len(results)),
            "per_cluster_unlisted": summary_ms([r["done_seconds"] for r in unlisted]),
            **_client_load(output),
        }

    def _namespace(self, user: str) -> str:
        return f"{self.bench.namespace_prefix}-{user}"


def _labs(bench: BenchStack, tokens: dict[str, str]) -> dict[str, Any]:
    """Every user's lab, spawned at once and followed to ``complete`` (the set-up)."""
    started = time.monotonic()
    output = run_client(
        bench, {"mode": "spawn", "image": bench.image, "users": list(tokens.items())}
    )
    complete = [r["user"] for r in output["results"] if r.get("outcome") == "complete"]
    return {
        "spawned": len(complete),
        "failed": len(output["results"]) - len(complete),
        "outcomes": _outcomes(output["results"]),
        "seconds": round(time.monotonic() - started, 2),
        "users": complete,
    }


def run(
    workdir: Path,
    users: int = 50,
    max_workers: int = 4,
    api_latency: float = 0.0,
    workers: int | None = None,
    poll_seconds: float = 0.1,
) -> dict[str, Any]:
    """``api_latency``: seconds each Kubernetes call waits, as on a real control plane;
    ``poll_seconds``: how often the client reads a cluster it waits for."""
    workers = default_workers() if workers is None else workers
    nodes = nodes_for(users, max_workers)
    settings = StackSettings(
        workers=workers,
        nodes=nodes,
        pull_seconds=0.0,
        cache_images=True,
        api_latency=api_latency,
        config_overrides={"budgets": budget(max_workers)},
    )
    with BenchStack(workdir / f"clusters-{api_latency * 1000:g}ms", settings) as bench:
        names = [f"clusters-{index:04d}" for index in range(users)]
        tokens = bench.add_users(names)
        labs = _labs(bench, tokens)
        with_labs: list[str] = labs.pop("users")
        namespaces = {f"{bench.namespace_prefix}-{user}" for user in names}
        phases = Phases(bench, tokens, namespaces, poll_seconds)
        try:
            create = phases.create(with_labs, workers=1, max_workers=max_workers)
            clusters: dict[str, str] = create.pop("names")
            scale_up = phases.scale(clusters, max_workers)
            scale_down = phases.scale(clusters, 1)
            delete = phases.delete(clusters)
        finally:
            phases.close()
        return {
            "users": users,
            "max_workers": max_workers,
            "api_latency_ms": api_latency * 1000,
            "workers": workers,
            "nodes": nodes,
            "poll_seconds": poll_seconds,
            "budget": budget(max_workers)["default"],
            "labs": labs,
            "create": create,
            "scale_up": scale_up,
            "scale_down": scale_down,
            "delete": delete,
            "kubernetes_calls": phases.calls,
            "cost": phases.cost,
            "census": phases.census,
            "service_log": log_findings(bench.service_log),
        }

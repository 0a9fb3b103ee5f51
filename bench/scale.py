"""Benchmark: the service's passes against a platform's worth of labs, 1,000 to 10,000.

No cluster of 10,000 labs fits on this machine, so one is simulated: for each size, an
emulator in a process of its own holds ``labs`` users' running labs on 500 nodes, built by
the service's own builders (``devstack.kube.population``), with nothing running. Against
it, and a real Redis (the local stack's), the service's real components measure:

- **rebuild**: Redis emptied, one reconcile pass (``app.engine.reconcile.Reconciler``) until
  every lab's record is back, in process; then Redis memory per lab (``used_memory``);
- **reconcile**: a pass with every record in place (what the leader runs every
  ``watcher.reconcileSeconds``);
- **prepuller**: its decision pass over the 500 nodes (``Prepuller.run_pass``), the first
  (a few nodes lack an image) and in the steady state;
- **watcher**: ``WorkloadWatcher`` from leadership to every kind's first list done and watch
  open, its CPU while idle, and per 1,000 pod changes (restart counts bumped in the
  emulator's store: changes that need no repair, the watcher's common case);
- **status**: the service under gunicorn, ``GET`` of every lab's status in turn (``wrk``),
  beside ``/healthz`` on the same server as a yardstick;
- **rebuild through gunicorn**: Redis emptied under the running service, the time until the
  labs route lists every lab again.

In-process passes run in this process, so their time and CPU are the pass's own (the
emulator's CPU, serving the lists, is measured apart in its process). The report gives each
measure at each size and its growth exponent between the smallest and the largest:
log(v_large / v_small) / log(n_large / n_small), 1 being linear.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import redis
import requests
import yaml

from app import create_app
from app.builders.names import lab_namespace, object_name
from app.config import Config, parse_config
from app.engine.reconcile import Reconciler, tracked
from app.extensions.labs import Machinery, machinery_of
from app.models.images import LabImage
from app.workloads.image.placement import pull_reference
from bench import status as status_bench
from bench.services import cpu_seconds, free_ports, log_findings, rss_kib, start_service
from devstack.kube.population import Population, populate
from devstack.stack import SERVICE_NAMESPACE, LocalStack, StackOptions, install_platform

SIZES = (1000, 3000, 10000)
NODES = 500
POD_CHANGES = 1000
"""Pod changes sent to the watcher to measure its cost per change."""
IDLE_SECONDS = 10.0
"""How long the watcher's idle CPU is sampled."""
STEADY_PASSES = 3
PREPULL_SETTLE_SECONDS = 60.0
"""How long the prepuller's pulls may take to finish before its steady pass is measured."""
USER_FORMAT = "scale%05d"
"""Usernames of the population, in ``string.format`` (population) and ``%`` (wrk) forms."""
POPULATION_USERNAME = "scale{index:05d}"
WATCHER_THREADS = "lab-watcher"
"""The elected watcher's threads are named after its role (``app.engine.watcher``)."""
LINEAR_TOLERANCE = 1.15
"""An exponent up to this is read as linear: two or three sizes on a shared machine."""
REBUILD_GOAL_SECONDS = 30.0
GIVE_UP_SECONDS = 300.0
IN_PROCESS_LOG_LEVEL = "WARNING"
"""The components run in this process log only their complaints: the benchmark's output is
its progress, and gunicorn's log (at the configured level) is read for findings."""


# The emulator's process ---------------------------------------------------------------


def _emulator_main(conn: Connection, job: dict[str, Any]) -> None:
    """The populated emulator, in a process of its own; answers ``(command, argument)``
    messages on ``conn`` until ``stop``."""
    from devstack.kube import KubernetesEmulator
    from devstack.tls import LocalAuthority

    config = parse_config(job["config"])
    # Signed by the stack's CA, which the service is told to trust.
    authority = LocalAuthority(Path(job["tls_dir"]))
    kube = KubernetesEmulator(api_latency=job["api_latency"], authority=authority)
    kube.start()
    install_platform(kube)
    images = tuple(LabImage(**image) for image in job["images"])
    population = Population(
        labs=job["labs"], nodes=job["nodes"], images=images, username_format=POPULATION_USERNAME
    )
    report = populate(kube, config, population)

    def settle(quiet: float = 0.5) -> float:
        """Seconds until the emulator has written nothing for ``quiet`` seconds (the
        namespace controller looks at each new namespace a moment after it appears)."""
        begun = time.monotonic()
        version = kube.store.resource_version
        while True:
            time.sleep(quiet)
            now = kube.store.resource_version
            if now == version:
                return time.monotonic() - begun
            version = now

    settled = settle()
    conn.send(
        {
            "url": kube.url,
            "populate_seconds": round(report.seconds, 2),
            "settled_seconds": round(settled, 2),
            "objects": report.objects,
            "rss_kib": rss_kib(os.getpid()),
        }
    )

    def change_pods(count: int) -> float:
        begun = time.monotonic()
        for index in range(count):
            username = population.username(index % population.labs)
            namespace = lab_namespace(config.namespace_prefix, username)
            kube.store.mutate("pods", namespace, object_name(username, "lab"), _restarted)
        return time.monotonic() - begun

    def calls() -> dict[str, int]:
        counted = Counter(f"{e.verb} {e.resource}" for e in kube.audit.entries())
        kube.audit.clear()
        return dict(counted)

    commands: dict[str, Callable[[Any], Any]] = {
        "rss": lambda _: rss_kib(os.getpid()),
        "watches": lambda _: kube.open_watches,
        "calls": lambda _: calls(),
        "change_pods": change_pods,
        "settle": lambda _: settle(),
    }
    while True:
        command, argument = conn.recv()
        if command == "stop":
            break
        conn.send(commands[command](argument))
    kube.stop()
    conn.close()


def _restarted(pod: dict[str, Any]) -> None:
    """A container restart as the kubelet reports one, its lab still running and ready."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        status["restartCount"] = int(status.get("restartCount") or 0) + 1


class PopulatedEmulator:
    """The emulator process, seen from the benchmark."""

    def __init__(self, job: dict[str, Any]) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self.process = context.Process(target=_emulator_main, args=(child, job), daemon=True)
        self.process.start()
        child.close()
        if not self._conn.poll(GIVE_UP_SECONDS):
            self.stop()
            raise RuntimeError("the populated emulator did not start in time")
        self.started: dict[str, Any] = self._conn.recv()
        self.url = str(self.started["url"])

    def ask(self, command: str, argument: Any = None) -> Any:
        self._conn.send((command, argument))
        return self._conn.recv()

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid

    def cpu(self) -> float:
        return cpu_seconds(self.pid) or 0.0

    def stop(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(OSError):
                self._conn.send(("stop", None))
            self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


# Measuring in process -----------------------------------------------------------------


def _thread_cpu(prefix: str) -> float:
    """CPU seconds used so far by this process's threads whose name starts with ``prefix``
    (Linux's per-thread ``/proc`` counters)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for thread in threading.enumerate():
        if not thread.name.startswith(prefix) or thread.native_id is None:
            continue
        try:
            text = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


@dataclass
class _Timed:
    seconds: float
    cpu_seconds: float
    api_cpu_seconds: float
    calls: dict[str, int]
    value: Any


def _timed(emulator: PopulatedEmulator, work: Callable[[], Any]) -> _Timed:
    emulator.ask("calls")
    api_cpu = emulator.cpu()
    cpu = time.process_time()
    begun = time.monotonic()
    value = work()
    seconds = time.monotonic() - begun
    return _Timed(
        seconds=seconds,
        cpu_seconds=time.process_time() - cpu,
        api_cpu_seconds=emulator.cpu() - api_cpu,
        calls=emulator.ask("calls"),
        value=value,
    )


def _pass_figures(timed: _Timed) -> dict[str, Any]:
    return {
        "seconds": round(timed.seconds, 3),
        "cpu_seconds": round(timed.cpu_seconds, 3),
        "api_server_cpu_seconds": round(timed.api_cpu_seconds, 3),
        "kubernetes_calls": sum(timed.calls.values()),
        "calls": timed.calls,
    }


def _lab_records(client: redis.Redis, prefix: str) -> int:
    return int(client.scard(f"{prefix}labs"))


def _used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def _rebuild(
    machinery: Machinery, emulator: PopulatedEmulator, client: redis.Redis, config: Config
) -> dict[str, Any]:
    """Redis emptied; one reconcile pass brings every lab's record back."""
    client.flushall()
    machinery.images.refresh_all()  # The image lists went too; not part of the labs' rebuild.
    memory_before = _used_memory(client)
    reconciler = Reconciler(machinery.engine.store, machinery.context.kube, _kinds(machinery))
    timed = _timed(emulator, reconciler.run)
    records = _lab_records(client, config.redis.key_prefix)
    memory_after = _used_memory(client)
    return {
        **_pass_figures(timed),
        "complete": bool(timed.value),
        "lab_records": records,
        "redis_used_memory_bytes": memory_after - memory_before,
        "redis_bytes_per_lab": round((memory_after - memory_before) / max(1, records)),
    }


def _kinds(machinery: Machinery) -> list[Any]:
    return list(machinery.engine.kinds.values())


def _steady_reconcile(machinery: Machinery, emulator: PopulatedEmulator) -> dict[str, Any]:
    """Passes with every record in place: what the leader repeats."""
    reconciler = Reconciler(machinery.engine.store, machinery.context.kube, _kinds(machinery))
    runs = [_timed(emulator, reconciler.run) for _ in range(STEADY_PASSES)]
    middle = sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]
    return {**_pass_figures(middle), "seconds_each": [round(r.seconds, 3) for r in runs]}


def _prepuller(machinery: Machinery, emulator: PopulatedEmulator) -> dict[str, Any]:
    first = _timed(emulator, machinery.prepuller.run_pass)
    # Until the pulls the first pass started are done and their pods gone: then a pass is
    # the steady state's, deciding there is nothing to do.
    begun = time.monotonic()
    passes = 1
    while time.monotonic() - begun < PREPULL_SETTLE_SECONDS:
        time.sleep(0.2)
        report = machinery.prepuller.run_pass()
        passes += 1
        if report.missing == 0 and report.in_flight == 0 and not report.removed:
            break
    settled = time.monotonic() - begun
    steady = [_timed(emulator, machinery.prepuller.run_pass) for _ in range(STEADY_PASSES)]
    middle = sorted(steady, key=lambda r: r.seconds)[len(steady) // 2]
    first_report = first.value
    return {
        "first": {
            **_pass_figures(first),
            "nodes": first_report.nodes,
            "eligible": first_report.eligible,
            "images": first_report.images,
            "missing": first_report.missing,
            "pulls_started": len(first_report.started),
        },
        "settled_seconds": round(settled, 2),
        "passes_to_settle": passes,
        "steady": {**_pass_figures(middle), "seconds_each": [round(r.seconds, 3) for r in steady]},
    }


def _wait(condition: Callable[[], bool], timeout: float = GIVE_UP_SECONDS) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.002)
    return False


def _mget_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return int((stats.get("cmdstat_mget") or {}).get("calls") or 0)


def _watcher(
    machinery: Machinery, emulator: PopulatedEmulator, client: redis.Redis
) -> dict[str, Any]:
    """The elected watcher: its start, its idle cost and its cost per pod change."""
    watcher = machinery.watcher
    watches = len(tracked(_kinds(machinery)))
    open_before = int(emulator.ask("watches"))
    reconciles = watcher.reconciles
    emulator.ask("calls")
    begun = time.monotonic()
    cpu = time.process_time()
    watcher.start()
    try:
        if not _wait(lambda: watcher.is_leader):
            return {"error": "never became leader"}
        leader_at = time.monotonic()
        if not _wait(lambda: int(emulator.ask("watches")) >= open_before + watches):
            return {"error": "the watches never opened"}
        open_at = time.monotonic()
        _wait(lambda: watcher.reconciles > reconciles)
        reconciled_at = time.monotonic()
        start_cpu = time.process_time() - cpu
        start_calls = emulator.ask("calls")

        emulator.ask("settle")
        idle_cpu = _thread_cpu(WATCHER_THREADS)
        time.sleep(IDLE_SECONDS)
        idle = _thread_cpu(WATCHER_THREADS) - idle_cpu

        mgets = _mget_calls(client)
        changes_cpu = _thread_cpu(WATCHER_THREADS)
        changed_at = time.monotonic()
        emulator.ask("change_pods", POD_CHANGES)
        applied = _wait(lambda: _mget_calls(client) - mgets >= POD_CHANGES, timeout=120)
        applied_at = time.monotonic()
        changes = _thread_cpu(WATCHER_THREADS) - changes_cpu
        changes_calls = emulator.ask("calls")
    finally:
        watcher.stop()
    return {
        "watches": watches,
        "leader_seconds": round(leader_at - begun, 3),
        "start_seconds": round(open_at - leader_at, 3),
        "start_to_first_reconcile_seconds": round(reconciled_at - leader_at, 3),
        "start_cpu_seconds": round(start_cpu, 3),
        "start_calls": start_calls,
        "idle_cpu_seconds_per_minute": round(idle * 60 / IDLE_SECONDS, 3),
        "pod_changes": POD_CHANGES,
        "pod_changes_applied": applied,
        "pod_changes_seconds": round(applied_at - changed_at, 3),
        "cpu_seconds_per_1000_pod_changes": round(changes * 1000 / POD_CHANGES, 3),
        "calls_during_pod_changes": changes_calls,
    }


# Through gunicorn ---------------------------------------------------------------------


def _service_config(stack: LocalStack, kube_url: str) -> dict[str, Any]:
    """The stack's configuration for the service, pointed at the populated emulator."""
    raw = stack.service_config()
    raw["kubernetes"] = {
        "mode": "host",
        "host": kube_url,
        "certificateAuthority": str(stack.authority.ca_path),
        "requestTimeout": 60,
        "serviceNamespace": SERVICE_NAMESPACE,
    }
    return raw


def _through_gunicorn(
    stack: LocalStack,
    config_path: Path,
    workdir: Path,
    labs: int,
    *,
    workers: int,
    seconds: float,
    repeats: int,
    connections: int,
) -> dict[str, Any]:
    """Status throughput with every record in Redis, then a rebuild after Redis loss."""
    client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    prefix = "spawner:"
    before = client.get(f"{prefix}complete")
    (port,) = free_ports(1)
    log_path = workdir / f"service-{labs}.log"
    service = start_service(
        stack,
        port=port,
        workers=workers,
        log_path=log_path,
        config_path=config_path,
        timeout=GIVE_UP_SECONDS,
    )
    try:
        # The leader's first reconcile rewrites the completeness note when it ends.
        _wait(lambda: client.get(f"{prefix}complete") != before, timeout=GIVE_UP_SECONDS)
        admin = str(stack.state()["tokens"]["admin"]["token"])
        use_wrk = shutil.which("wrk") is not None
        load = status_bench._wrk if use_wrk else status_bench._loadgen
        path = "/spawner/v1/labs/"
        load(service.url, admin, labs, USER_FORMAT, path, 2, connections)  # warm up
        runs = []
        healthz = []
        for _ in range(repeats):
            healthz.append(load(service.url, admin, 1, "", "/healthz", seconds, connections))
            runs.append(load(service.url, admin, labs, USER_FORMAT, path, seconds, connections))
        ordered = sorted(runs, key=lambda r: r.get("requests_per_second") or 0)
        middle = ordered[len(ordered) // 2]
        health = sorted(healthz, key=lambda r: r.get("requests_per_second") or 0)
        rss = service.worker_rss_kib()
        rebuilt = _rebuild_under_service(client, service.url, admin, labs)
    finally:
        service.stop()
    status_rate = middle.get("requests_per_second") or 0
    health_rate = health[len(health) // 2].get("requests_per_second") or 0
    return {
        "status": {
            "tool": "wrk" if use_wrk else "bench.loadgen",
            "workers": workers,
            "connections": connections,
            "seconds": seconds,
            "requests_per_second": status_rate,
            "latency_ms": middle.get("latency_ms"),
            "non_2xx": middle.get("non_2xx", 0),
            "requests_per_second_each": [r.get("requests_per_second") for r in runs],
            "healthz_requests_per_second": health_rate,
            "ratio_to_healthz": round(status_rate / health_rate, 3) if health_rate else None,
            "worker_rss_kib": sorted(rss.values()),
        },
        "rebuild_under_service": rebuilt,
        "service_log": log_findings(log_path),
    }


def _rebuild_under_service(client: redis.Redis, url: str, admin: str, labs: int) -> dict[str, Any]:
    """Redis emptied under the running service: until the labs route lists every lab."""
    headers = {"Authorization": f"Bearer {admin}"}
    answers: Counter[int] = Counter()
    listed_at: float | None = None
    with requests.Session() as session:
        session.trust_env = False
        client.flushall()
        begun = time.monotonic()
        while time.monotonic() - begun < GIVE_UP_SECONDS:
            try:
                response = session.get(url + "/spawner/v1/labs", headers=headers, timeout=30)
            except requests.RequestException:
                time.sleep(0.05)
                continue
            answers[response.status_code] += 1
            if response.status_code == 200 and len(response.json()) >= labs:
                listed_at = time.monotonic()
                break
            time.sleep(0.05)
    return {
        "seconds_to_full_list": round(listed_at - begun, 3) if listed_at is not None else None,
        "list_answers_by_status": {str(k): v for k, v in sorted(answers.items())},
    }


# One size, and the whole run ----------------------------------------------------------


def _one_size(
    stack: LocalStack,
    images: list[LabImage],
    labs: int,
    workdir: Path,
    *,
    nodes: int,
    api_latency: float,
    workers: int,
    status_seconds: float,
    status_repeats: int,
    connections: int,
) -> dict[str, Any]:
    client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    client.flushall()
    placeholder = _service_config(stack, "http://127.0.0.1:1")
    job = {
        "labs": labs,
        "nodes": nodes,
        "images": [{"reference": i.reference, "name": i.name, "digest": i.digest} for i in images],
        "config": placeholder,
        "api_latency": api_latency,
        "tls_dir": str(stack.authority.directory),
    }
    emulator = PopulatedEmulator(job)
    try:
        raw = _service_config(stack, emulator.url)
        config = parse_config({**raw, "logLevel": IN_PROCESS_LOG_LEVEL})
        config_path = workdir / f"config-{labs}.yaml"
        config_path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
        machinery = machinery_of(create_app(config))
        result: dict[str, Any] = {
            "labs": labs,
            "nodes": nodes,
            "population": {
                "seconds": emulator.started["populate_seconds"],
                "objects": emulator.started["objects"],
                "emulator_rss_kib": emulator.started["rss_kib"],
            },
        }
        result["rebuild"] = _rebuild(machinery, emulator, client, config)
        result["reconcile"] = _steady_reconcile(machinery, emulator)
        result["prepuller"] = _prepuller(machinery, emulator)
        result["watcher"] = _watcher(machinery, emulator, client)
        result.update(
            _through_gunicorn(
                stack,
                config_path,
                workdir,
                labs,
                workers=workers,
                seconds=status_seconds,
                repeats=status_repeats,
                connections=connections,
            )
        )
        result["emulator_rss_kib_at_end"] = emulator.ask("rss")
        machinery.registries.close()
        return result
    finally:
        emulator.stop()


def _prepull_images(stack: LocalStack) -> list[LabImage]:
    """The images the configuration prepulls, as the image refresher finds them: what labs
    run and nodes hold."""
    raw = {**stack.service_config(), "logLevel": IN_PROCESS_LOG_LEVEL}
    machinery = machinery_of(create_app(parse_config(raw)))
    try:
        machinery.images.refresh_all()
        found: list[LabImage] = []
        for _, image_set in machinery.context.images.image_sets():
            for image in image_set.prepulled_images():
                lab_image = image.as_lab_image()
                if all(pull_reference(image) != f"{i.reference}@{i.digest}" for i in found):
                    found.append(lab_image)
        return found
    finally:
        machinery.registries.close()


GROWTH = {
    "rebuild (in process)": ("rebuild", "seconds"),
    "rebuild CPU": ("rebuild", "cpu_seconds"),
    "reconcile pass": ("reconcile", "seconds"),
    "reconcile CPU": ("reconcile", "cpu_seconds"),
    "reconcile Kubernetes calls": ("reconcile", "kubernetes_calls"),
    "prepuller decision pass": ("prepuller", "steady", "seconds"),
    "watcher start": ("watcher", "start_seconds"),
    "watcher CPU per 1,000 pod changes": ("watcher", "cpu_seconds_per_1000_pod_changes"),
    "watcher idle CPU per minute": ("watcher", "idle_cpu_seconds_per_minute"),
    "Redis bytes per lab": ("rebuild", "redis_bytes_per_lab"),
    "Redis used memory": ("rebuild", "redis_used_memory_bytes"),
    "status requests/s": ("status", "requests_per_second"),
    "rebuild through gunicorn": ("rebuild_under_service", "seconds_to_full_list"),
    "emulator RSS": ("population", "emulator_rss_kib"),
}
"""Each measure's place in a size's result."""
PER_LAB = {"Redis bytes per lab"}
"""Measures already per lab: flat is linear in total."""
THROUGHPUT = {"status requests/s"}
"""Measures where more is better: a falling rate is the growth to watch."""


def _dig(result: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = result
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return float(value) if isinstance(value, (int, float)) else None


def growth(sizes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each measure at every size and its exponent from the smallest size to the largest."""
    done = [s for s in sizes if "error" not in s]
    found: dict[str, dict[str, Any]] = {}
    if len(done) < 2:
        return found
    small, large = done[0], done[-1]
    ratio = large["labs"] / small["labs"]
    for label, path in GROWTH.items():
        values = {str(s["labs"]): _dig(s, path) for s in done}
        low, high = _dig(small, path), _dig(large, path)
        exponent = None
        if low and high and low > 0 and high > 0 and ratio > 1:
            exponent = round(math.log(high / low) / math.log(ratio), 2)
        found[label] = {
            "values": values,
            "exponent": exponent,
            "verdict": _verdict(label, exponent),
        }
    return found


def _verdict(label: str, exponent: float | None) -> str:
    if exponent is None:
        return "n/a"
    if label in THROUGHPUT:
        return "flat or better" if exponent >= -0.15 else "falls with size"
    if label in PER_LAB:
        return "linear or better" if exponent <= 0.15 else "worse than linear"
    return "linear or better" if exponent <= LINEAR_TOLERANCE else "worse than linear"


def run(
    workdir: Path,
    sizes: tuple[int, ...] = SIZES,
    *,
    nodes: int = NODES,
    api_latency: float = 0.0,
    workers: int = status_bench.YARDSTICK_WORKERS,
    status_seconds: float = 5.0,
    status_repeats: int = 2,
    connections: int = 64,
) -> dict[str, Any]:
    workdir = workdir / ("scale" if not api_latency else f"scale-{api_latency * 1000:g}ms")
    workdir.mkdir(parents=True, exist_ok=True)
    stack = LocalStack(StackOptions(state_dir=workdir / "stack", nodes=0)).start(spawner=False)
    try:
        images = _prepull_images(stack)
        results = []
        for labs in sorted(sizes):
            print(f"   {labs} labs on {nodes} nodes", flush=True)
            try:
                result = _one_size(
                    stack,
                    images,
                    labs,
                    workdir,
                    nodes=nodes,
                    api_latency=api_latency,
                    workers=workers,
                    status_seconds=status_seconds,
                    status_repeats=status_repeats,
                    connections=connections,
                )
            except Exception as exc:  # one size failing must not lose the others
                result = {"labs": labs, "error": f"{type(exc).__name__}: {exc}"}
            results.append(result)
    finally:
        stack.stop()
    by_growth = growth(results)
    largest: dict[str, Any] = next((r for r in reversed(results) if "error" not in r), {})
    rebuild_largest = _dig(largest, ("rebuild", "seconds"))
    return {
        "sizes": [r["labs"] for r in results],
        "nodes": nodes,
        "images": [i.reference for i in images],
        "api_latency_ms": round(api_latency * 1000, 1),
        "workers": workers,
        "results": results,
        "growth": by_growth,
        "rebuild_goal": {
            "labs": largest.get("labs"),
            "seconds": rebuild_largest,
            "goal_seconds": REBUILD_GOAL_SECONDS,
            "met": rebuild_largest is not None and rebuild_largest < REBUILD_GOAL_SECONDS,
            "through_gunicorn_seconds": _dig(
                largest, ("rebuild_under_service", "seconds_to_full_list")
            ),
        },
        "passes_listing_per_user": _per_user_calls(results),
    }


def _per_user_calls(results: list[dict[str, Any]]) -> list[str]:
    """Passes whose Kubernetes calls grow with the number of labs: an N+1 over users."""
    done = [r for r in results if "error" not in r]
    if len(done) < 2:
        return []
    small, large = done[0], done[-1]
    found = []
    for label, path in (
        ("rebuild", ("rebuild", "kubernetes_calls")),
        ("reconcile", ("reconcile", "kubernetes_calls")),
        ("prepuller decision pass", ("prepuller", "steady", "kubernetes_calls")),
        ("watcher start", ("watcher", "start_calls")),
    ):
        low, high = _call_count(small, path), _call_count(large, path)
        if low is not None and high is not None and high > low:
            found.append(f"{label}: {low} calls at {small['labs']} labs, {high} at {large['labs']}")
    return found


def _call_count(result: dict[str, Any], path: tuple[str, ...]) -> int | None:
    """Kubernetes calls at ``path``: a count, or calls by verb and resource summed."""
    value: Any = result
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if isinstance(value, dict):
        return sum(int(v) for v in value.values())
    return int(value) if isinstance(value, (int, float)) else None

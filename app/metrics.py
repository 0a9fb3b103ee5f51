"""Every Prometheus metric the service exports, defined once.

Under gunicorn the service runs several worker processes per replica, and a scrape reaches
one of them. ``prometheus_client``'s multiprocess mode makes the answer the replica's, not
the worker's: each process writes its samples to memory-mapped files in
``PROMETHEUS_MULTIPROC_DIR`` (set and emptied by gunicorn's master before any worker imports
this module, see ``gunicorn.conf.py``), and the scrape sums them. Without that variable (tests
that build the app in-process) the same metrics live in this process's memory.

Two sorts of metric:

- **Counted where it happens**, in the process it happens in: operations ended, Kubernetes
  and Gafaelfawr calls, Redis round trips, event streams open, loops led. Recording one is a
  write to a memory-mapped file, never a network call. The two counted on every request
  (Redis round trips, and Gafaelfawr answers found in memory) are ``HotCounter``s: added
  up in the process and written to the shared counter once a second, because the shared
  counter's write takes a lock and checks the process id each time, which cost a status
  read several percent of its throughput.
- **Read from Redis at scrape time** (``StateCollector``): workloads by status, operations
  in progress and waiting, image records by state, the prepuller's progress. These are facts
  about the whole service, which every worker reads the same, so whichever worker answers
  the scrape gives the same exact numbers.

Label values are bounded: kinds, actions, outcomes, failure reasons, HTTP verbs, resource
names and status codes, loop names. No username, lab name or token ever becomes a label.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter as Tally
from collections.abc import Iterator
from enum import StrEnum
from typing import Any, cast

import redis
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""The directory the workers' samples are kept in; its presence turns multiprocess mode on."""


class FailureReason(StrEnum):
    """Why an operation failed, in a few words a dashboard can group by (its message, for
    people, stays on the record and the event stream)."""

    IMAGE_PULL = "image_pull"
    UNSCHEDULABLE = "unschedulable"
    CRASH = "crash"
    QUOTA = "quota"
    TIMEOUT = "timeout"
    KUBERNETES_ERROR = "kubernetes_error"
    OTHER = "other"


class Outcome(StrEnum):
    """How an operation ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SUPERSEDED = "superseded"
    """A delete took over (a spawn deleted before it finished)."""


class HotCounter:
    """A labelled ``Counter`` bumped on a hot path: each increment is an addition in this
    process's memory, and ``flush`` (every ``FLUSH_SECONDS`` from ``start_flushing``, and
    before this process answers a scrape) adds them to the shared counter. A scrape of
    another worker sees this one's counts at most that late."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self._pending: Tally[tuple[str, ...]] = Tally()
        self._lock = threading.Lock()

    def inc(self, *labels: str) -> None:
        with self._lock:
            self._pending[labels] += 1

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, Tally()
        for labels, count in pending.items():
            (self.counter.labels(*labels) if labels else self.counter).inc(count)


FLUSH_SECONDS = 1.0
"""How often the hot counters reach the shared samples."""


_OPERATION_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)
_CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

OPERATIONS = Counter(
    "lab_spawner_operations",
    "Operations (spawns and deletes) that ended, by workload kind, action and outcome.",
    ["kind", "action", "outcome"],
)
OPERATION_FAILURES = Counter(
    "lab_spawner_operation_failures",
    "Operations that failed, by workload kind, action and reason.",
    ["kind", "action", "reason"],
)
OPERATION_DURATION = Histogram(
    "lab_spawner_operation_duration_seconds",
    "Seconds from an operation's queueing to its end, by workload kind, action and outcome.",
    ["kind", "action", "outcome"],
    buckets=_OPERATION_BUCKETS,
)

KUBERNETES_REQUESTS = Counter(
    "lab_spawner_kubernetes_requests",
    "Requests to the Kubernetes API, by verb, resource and HTTP status (0: no answer).",
    ["verb", "resource", "status"],
)
KUBERNETES_REQUEST_DURATION = Histogram(
    "lab_spawner_kubernetes_request_duration_seconds",
    "Seconds until the Kubernetes API answered (a watch: until it started), by verb and resource.",
    ["verb", "resource"],
    buckets=_CALL_BUCKETS,
)

REDIS_ROUND_TRIPS = Counter(
    "lab_spawner_redis_round_trips",
    "Commands or pipelines sent to Redis (each one round trip).",
)
REDIS_ROUND_TRIPS_HOT = HotCounter(REDIS_ROUND_TRIPS)
"""``REDIS_ROUND_TRIPS`` as every command counts it."""
REDIS_ERRORS = Counter(
    "lab_spawner_redis_errors",
    "Redis round trips that failed without an answer, by error (connection, timeout, or "
    "stalled: not sent while the server had not answered since a timeout).",
    ["error"],
)

GAFAELFAWR_LOOKUPS = Counter(
    "lab_spawner_gafaelfawr_lookups",
    "Gafaelfawr answers a request needed, by answer and where it was found: memory (this "
    "process), redis (the shared cache) or gafaelfawr (a call).",
    ["answer", "source"],
)
GAFAELFAWR_LOOKUPS_HOT = HotCounter(GAFAELFAWR_LOOKUPS)
"""``GAFAELFAWR_LOOKUPS`` as every request counts it."""
GAFAELFAWR_REQUESTS = Counter(
    "lab_spawner_gafaelfawr_requests",
    "Calls to Gafaelfawr, by answer and HTTP status (0: no answer).",
    ["answer", "status"],
)
GAFAELFAWR_REQUEST_DURATION = Histogram(
    "lab_spawner_gafaelfawr_request_duration_seconds",
    "Seconds until Gafaelfawr answered, by answer.",
    ["answer"],
    buckets=_CALL_BUCKETS,
)

EVENT_STREAMS = Gauge(
    "lab_spawner_event_streams_open",
    "Workload event streams being followed by the replica's workers.",
    multiprocess_mode="livesum",
)
LEADER = Gauge(
    "lab_spawner_leader",
    "1 when one of the replica's workers leads the elected loop, else 0.",
    ["loop"],
    multiprocess_mode="livesum",
)


GAFAELFAWR_ANSWERS = ("token_info", "user_info")
GAFAELFAWR_SOURCES = ("memory", "redis", "gafaelfawr")
REDIS_ERROR_KINDS = ("connection", "timeout", "stalled")


def declare_series(*, kinds: list[str], actions: list[str], loops: list[str]) -> None:
    """Give every series whose labels are known in advance its zero, so that each
    documented metric is in the first scrape: a rate or an alert on failures has a series
    to read before the first failure, and a loop nobody leads reads 0 rather than nothing.
    Series whose labels only a call can give (Kubernetes' resources and statuses, Gafaelfawr's
    other statuses) appear with that call; Gafaelfawr's 200s start at zero."""
    for kind in kinds:
        for action in actions:
            for outcome in Outcome:
                OPERATIONS.labels(kind, action, outcome.value)
                OPERATION_DURATION.labels(kind, action, outcome.value)
            for reason in FailureReason:
                OPERATION_FAILURES.labels(kind, action, reason.value)
    for error in REDIS_ERROR_KINDS:
        REDIS_ERRORS.labels(error)
    for answer in GAFAELFAWR_ANSWERS:
        GAFAELFAWR_REQUESTS.labels(answer, "200")
        GAFAELFAWR_REQUEST_DURATION.labels(answer)
        for source in GAFAELFAWR_SOURCES:
            GAFAELFAWR_LOOKUPS.labels(answer, source)
    for loop in loops:
        LEADER.labels(loop).inc(0)


# Reading Kubernetes paths ------------------------------------------------------------------


def kubernetes_verb(method: str, path: str, query: list[tuple[str, Any]] | None) -> str:
    """The Kubernetes verb of a request (``get``, ``list``, ``watch``, ``create``...)."""
    if method == "GET":
        if query and any(key == "watch" and value for key, value in query):
            return "watch"
        return "get" if _path_parts(path)[1] else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )


def kubernetes_resource(path: str) -> str:
    """The resource a request is about (``pods``, ``pods/log``, ``namespaces``): the names
    of objects and namespaces are left out, so the label stays bounded."""
    resource, _, subresource = _path_parts(path)
    return f"{resource}/{subresource}" if subresource else resource


def _path_parts(path: str) -> tuple[str, bool, str]:
    """A request path's resource, whether it names one object, and its subresource."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    # /api/v1/... or /apis/<group>/<version>/...
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return "unknown", False, ""
    return rest[0], len(rest) >= 2, rest[2] if len(rest) >= 3 else ""


def observe_kubernetes(verb: str, resource: str, status: int, seconds: float) -> None:
    """Count one Kubernetes request and its latency."""
    KUBERNETES_REQUESTS.labels(verb, resource, str(status)).inc()
    KUBERNETES_REQUEST_DURATION.labels(verb, resource).observe(seconds)


def observe_operation(
    kind: str,
    action: str,
    outcome: Outcome,
    started: float,
    reason: FailureReason | None = None,
) -> None:
    """Count an operation that ended, and its time since it was queued (``started``, the
    wall-clock time stored with the operation, since it may have been queued elsewhere)."""
    OPERATIONS.labels(kind, action, outcome.value).inc()
    OPERATION_DURATION.labels(kind, action, outcome.value).observe(max(0.0, time.time() - started))
    if reason is not None:
        OPERATION_FAILURES.labels(kind, action, reason.value).inc()


# Read from Redis at scrape time --------------------------------------------------------------


class StateCollector(Collector):
    """The gauges about the whole service, read from Redis when scraped: a few round trips
    (one pipeline of indexes and counters, one read of the records), whatever the number
    of workloads."""

    def __init__(self, client: redis.Redis, key_prefix: str, kinds: list[str]) -> None:
        self._redis = client
        self._prefix = key_prefix
        self._kinds = kinds

    def describe(self) -> list[Metric]:
        # Nothing to describe without reading Redis; registering must not.
        return []

    def collect(self) -> Iterator[Metric]:
        p = self._prefix
        pipe = self._redis.pipeline(transaction=False)
        for kind in self._kinds:
            pipe.smembers(f"{p}{kind}s")
        pipe.zrange(f"{p}ops", 0, -1)
        pipe.zrange(f"{p}admission:queue", 0, -1)
        pipe.hgetall(f"{p}prepull:progress")
        replies = pipe.execute()
        names = cast(list[set[str]], replies[: len(self._kinds)])
        pending, waiting, progress = replies[len(self._kinds) :]

        keys = [
            f"{p}{kind}:{name}"
            for kind, found in zip(self._kinds, names, strict=True)
            for name in found
        ]
        raws = cast(list[str | None], self._redis.mget(keys)) if keys else []
        statuses: Tally[tuple[str, str]] = Tally()
        image_states: Tally[str] = Tally()
        for key, raw in zip(keys, raws, strict=True):
            if raw is None:
                continue  # deleted between the two reads
            kind = key[len(p) :].split(":", 1)[0]
            record = _parse(raw)
            statuses[kind, str(record.get("status", "unknown"))] += 1
            if kind == "image" and "state" in record:
                image_states[str(record["state"])] += 1

        workloads = GaugeMetricFamily(
            "lab_spawner_workloads",
            "Workloads with a record, by kind and status (labs by state among them).",
            labels=["kind", "status"],
        )
        for (kind, status), count in sorted(statuses.items()):
            workloads.add_metric([kind, status], count)
        yield workloads

        images = GaugeMetricFamily(
            "lab_spawner_image_records",
            "Image digests with a record, by validation state.",
            labels=["state"],
        )
        for state, count in sorted(image_states.items()):
            images.add_metric([state], count)
        yield images

        in_progress = GaugeMetricFamily(
            "lab_spawner_operations_in_progress",
            "Operations queued to run or running, by workload kind (not those waiting for "
            "admission).",
            labels=["kind"],
        )
        for kind, count in sorted(_count_kinds(m.split(":", 1)[0] for m in pending).items()):
            in_progress.add_metric([kind], count)
        yield in_progress

        queued = GaugeMetricFamily(
            "lab_spawner_operations_waiting",
            "Creations waiting for a place (fair admission), by workload kind.",
            labels=["kind"],
        )
        # Queue members: <arrival>\n<group>\n<kind>:<name>\n<operation id>.
        waiting_kinds = (m.split("\n")[2].split(":", 1)[0] for m in waiting if m.count("\n") >= 3)
        for kind, count in sorted(_count_kinds(waiting_kinds).items()):
            queued.add_metric([kind], count)
        yield queued

        progress = cast(dict[str, str], progress)
        for name, help_text in (
            ("images", "Images the prepuller keeps on every eligible node."),
            ("nodes", "Nodes eligible for labs, which the prepuller keeps the images on."),
            ("missing", "Pulls missing: images times nodes that lack them."),
            ("running", "Prepull pods pulling now."),
        ):
            gauge = GaugeMetricFamily(f"lab_spawner_prepull_{name}", help_text)
            if name in progress:
                gauge.add_metric([], float(progress[name]))
            yield gauge


def _parse(raw: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _count_kinds(kinds: Iterator[str]) -> Tally[str]:
    return Tally(kinds)


class _ThisProcess(Collector):
    """This process's own metrics (without multiprocess mode), for a scrape's registry."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


HOT_COUNTERS = (REDIS_ROUND_TRIPS_HOT, GAFAELFAWR_LOOKUPS_HOT)


def flush_hot_counters() -> None:
    for counter in HOT_COUNTERS:
        counter.flush()


class HotCounterFlusher:
    """Flushes the hot counters every ``FLUSH_SECONDS`` in a thread of this process (a
    greenlet under gevent), from when the process starts its background work."""

    def __init__(self) -> None:
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="metrics-flush", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        flush_hot_counters()

    def _run(self) -> None:
        while not self._stopping.wait(FLUSH_SECONDS):
            flush_hot_counters()


def multiprocess() -> bool:
    """Whether the samples are shared by the replica's processes (gunicorn)."""
    return bool(os.environ.get(MULTIPROC_ENV))


def exposition(state: Collector) -> bytes:
    """The text a scrape reads: every worker's samples summed (or this process's), and the
    gauges read from Redis by ``state``."""
    flush_hot_counters()
    registry = CollectorRegistry(auto_describe=False)
    if multiprocess():
        MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(state)
    return generate_latest(registry)

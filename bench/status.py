"""Benchmark 3: status reads per second against bare Flask routes, in the same run.

1,000 lab records are written straight into Redis through the service's own
``LabStore.put_if_idle`` (the watcher's idempotent write, no operation involved), each a
copy of the record a real spawn left behind, so the service reads exactly what it would
after 1,000 finished spawns. The admin token asks for every user's status in turn. A bare
route runs in a second gunicorn with the service's own ``gunicorn.conf.py`` (same worker
class, worker count and access log), in a third with gunicorn's stock ``gevent`` worker
and access log (``STOCK_SETTINGS``, the yardstick of ``bench.goals``), and in a fourth with
the service's settings but gunicorn's stock access logger (``STOCK_LOGGER``); all are loaded
by ``wrk`` (or ``bench.loadgen``). Each load run also reports the CPU its gunicorn's workers
spent per request answered (``cpu_ms_per_request``), from ``/proc``, and how long each worker
waited for a core (``run_queue_ms_per_second``): two workers, the load client and Redis
runnable on two cores wait for each other, which a bare route with one worker
(``bare_route_one_worker``) shows beside them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from app.models.lab import LabRecord
from app.workloads.lab.store import LabStore
from bench.client import SpawnerClient
from bench.services import (
    RECONCILE_OUT_OF_THE_WAY,
    REPO_ROOT_TEXT,
    BenchStack,
    Gunicorn,
    Service,
    StackSettings,
    cpu_seconds,
    free_ports,
    log_findings,
    run_queue_seconds,
    start_gunicorn,
)
from bench.stats import median
from bench.storm import command_delta, redis_commands

LUA = Path(__file__).with_name("wrk_labs.lua")
STOCK_SETTINGS = (
    "--worker-class",
    "gevent",
    "--logger-class",
    "gunicorn.glogging.Logger",
    "--access-logformat",
    '%(h)s "%(r)s" %(s)s %(b)s %(M)sms',
)
"""gunicorn's own ``gevent`` worker and access logger, over the service's settings file: the
settings under which the reference implementation was measured beside this service (its
status route served 0.80 of a bare route under them), so a bare route under them is the
yardstick that carries the reference's figure to this machine."""
STOCK_LOGGER = ("--logger-class", "gunicorn.glogging.Logger")
"""The service's settings with gunicorn's stock access logger and its default format: beside
the bare route under the service's settings, what the access log costs a request."""
USER_FORMAT = "status-%04d"


def _write_records(bench: BenchStack, template: LabRecord, count: int) -> int:
    labs = LabStore.reading(bench.redis(), bench.key_prefix)
    written = 0
    for index in range(count):
        username = USER_FORMAT % index
        url = template.internal_url or ""
        record = dataclasses.replace(
            template,
            username=username,
            internal_url=url.replace(template.username, username),
        )
        written += labs.put_if_idle(record, expect=None)
    return written


def _wrk(
    url: str, token: str, users: int, fmt: str, prefix: str, seconds: float, connections: int
) -> dict[str, Any]:
    env = {
        **os.environ,
        "BENCH_TOKEN": token,
        "BENCH_USERS": str(users),
        "BENCH_USER_FORMAT": fmt,
        "BENCH_PATH_PREFIX": prefix,
    }
    command = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds:g}s",
        "--latency",
        "-s",
        str(LUA),
        url,
    ]
    output = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    return _parse_wrk(output)


def _parse_wrk(output: str) -> dict[str, Any]:
    def number(pattern: str) -> float | None:
        match = re.search(pattern, output)
        return float(match.group(1)) if match else None

    latency: dict[str, float] = {}
    for label, value, unit in re.findall(
        r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", output, re.M
    ):
        scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
        latency[f"p{label}"] = round(float(value) * scale, 3)
    errors = re.search(r"Socket errors: (.*)", output)
    return {
        "tool": "wrk",
        "requests": int(number(r"(\d+) requests in") or 0),
        "requests_per_second": number(r"Requests/sec:\s+([\d.]+)"),
        "non_2xx": int(number(r"Non-2xx or 3xx responses: (\d+)") or 0),
        "socket_errors": errors.group(1).strip() if errors else None,
        "latency_ms": latency,
    }


def _loadgen(
    url: str, token: str, users: int, fmt: str, prefix: str, seconds: float, connections: int
) -> dict[str, Any]:
    host, _, port = url.removeprefix("http://").partition(":")
    paths = [prefix + (fmt % i if fmt else "") for i in range(users)]
    job = {
        "host": host,
        "port": int(port),
        "paths": paths,
        "headers": {"Authorization": f"Bearer {token}"},
        "connections": connections,
        "duration": seconds,
    }
    output = subprocess.run(
        [sys.executable, "-m", "bench.loadgen"],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        cwd=REPO_ROOT_TEXT,
        check=True,
    ).stdout
    result: dict[str, Any] = json.loads(output)
    return result


def _bare_route(
    bench: BenchStack,
    log_name: str,
    extra_args: tuple[str, ...] = (),
    *,
    workers: int | None = None,
) -> Gunicorn:
    """``bench.bare_app`` under the service's settings file (``extra_args`` override some),
    with the service's workers unless ``workers`` says otherwise."""
    (port,) = free_ports(1)
    return start_gunicorn(
        "bench.bare_app:app",
        port=port,
        workers=workers or bench.settings.workers,
        log_path=bench.workdir / log_name,
        env={
            "SPAWNER_CONFIG_PATH": str(bench.stack.config_path),
            "SPAWNER_REDIS_URL": bench.stack.redis_url,
        },
        ready_path="/readyz",
        extra_args=extra_args,
    )


YARDSTICK_WORKERS = 2
"""Workers of the service and the bare routes here, whatever the service's default: the
reference's status figure is carried to this machine by its ratio to a bare route of two
gunicorn workers, so the goal is judged in that shape."""


def status_load(
    url: str,
    token: str,
    *,
    users: int,
    user_format: str,
    seconds: float,
    connections: int = 64,
) -> dict[str, Any]:
    """Status reads of ``users`` labs (``user_format % index``) at ``url`` for ``seconds``,
    with wrk where it is installed, else the Python load generator."""
    load = _wrk if shutil.which("wrk") is not None else _loadgen
    return load(url, token, users, user_format, "/spawner/v1/labs/", seconds, connections)


def workers_cpu_seconds(server: Gunicorn | Service) -> float:
    """CPU seconds used so far by the workers of ``server`` (user and system)."""
    return sum(cpu_seconds(pid) or 0.0 for pid in server.worker_pids())


def _web_worker_pids(server: Gunicorn | Service) -> list[int]:
    """The workers that answer ``server``'s requests (a service's web workers only)."""
    if isinstance(server, Service):
        return server.web_worker_pids()
    return server.worker_pids()


def _run_queue(pids: list[int]) -> float | None:
    waits = [run_queue_seconds(pid) for pid in pids]
    return None if any(w is None for w in waits) else sum(w or 0.0 for w in waits)


def measured_load(
    server: Gunicorn | Service,
    load: Any,
    *,
    token: str,
    users: int,
    prefix: str,
    seconds: float,
    connections: int,
) -> dict[str, Any]:
    """``load`` on ``server``, with the CPU its workers spent per request answered
    (``cpu_ms_per_request``): what a request costs the service, whatever the load client
    and the rest of the machine take of the cores."""
    before = workers_cpu_seconds(server)
    web = _web_worker_pids(server)
    waited_before = _run_queue(web)
    result: dict[str, Any] = load(
        server.url, token, users, USER_FORMAT, prefix, seconds, connections
    )
    spent = workers_cpu_seconds(server) - before
    waited_after = _run_queue(web)
    requests = int(result.get("requests") or 0)
    result["cpu_ms_per_request"] = round(spent * 1000 / requests, 3) if requests else None
    if waited_before is not None and waited_after is not None and web:
        # Per worker and second of load: how long a worker was ready to run but had no core.
        waited = (waited_after - waited_before) / len(web) / seconds
        result["run_queue_ms_per_second"] = round(waited * 1000, 1)
    return result


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median requests/s (latencies stay consistent with the rate)."""
    ordered = sorted(runs, key=lambda r: r.get("requests_per_second") or 0)
    return ordered[len(ordered) // 2] if ordered else {}


def run(
    workdir: Path,
    records: int = 1000,
    seconds: float = 10.0,
    connections: int = 64,
    tool: str = "auto",
    repeats: int = 3,
    workers: int = YARDSTICK_WORKERS,
) -> dict[str, Any]:
    use_wrk = tool == "wrk" or (tool == "auto" and shutil.which("wrk") is not None)
    load = _wrk if use_wrk else _loadgen
    settings = StackSettings(
        workers=workers, nodes=1, cache_images=True, config_overrides=RECONCILE_OUT_OF_THE_WAY
    )
    with BenchStack(workdir / "status", settings) as bench:
        assert bench.service is not None
        template_user = "status-template"
        tokens = bench.add_users([template_user])
        client = SpawnerClient(bench.url, bench.admin_token)
        client.spawn(template_user, tokens[template_user], bench.image)
        client.follow(template_user, tokens[template_user])
        template = LabStore.reading(bench.redis(), bench.key_prefix).get(template_user)
        if template is None:
            return {"error": "the template spawn left no lab record"}
        written = _write_records(bench, template, records)
        sample = client.status(USER_FORMAT % (records // 2))

        bare = _bare_route(bench, "bare.log")
        stock = _bare_route(bench, "bare-stock.log", STOCK_SETTINGS)
        stock_logger = _bare_route(bench, "bare-stock-logger.log", STOCK_LOGGER)
        one_worker = _bare_route(bench, "bare-one-worker.log", workers=1)
        try:
            admin = bench.admin_token
            prefix = "/spawner/v1/labs/"
            # Warm them all: connections, caches, the token's Gafaelfawr answers.
            load(bare.url, admin, records, USER_FORMAT, prefix, 2, connections)
            load(stock.url, admin, records, USER_FORMAT, prefix, 2, connections)
            load(stock_logger.url, admin, records, USER_FORMAT, prefix, 2, connections)
            load(one_worker.url, admin, records, USER_FORMAT, prefix, 2, connections)
            load(bench.url, admin, records, USER_FORMAT, prefix, 2, connections)
            # Interleaved rounds: whatever else the machine does hits every target alike.
            runs: dict[str, list[dict[str, Any]]] = {
                "bare": [],
                "bare_stock": [],
                "bare_stock_logger": [],
                "bare_one_worker": [],
                "healthz": [],
                "list": [],
                "status": [],
            }

            def measured(server: Gunicorn | Service) -> dict[str, Any]:
                return measured_load(
                    server,
                    load,
                    token=admin,
                    users=records,
                    prefix=prefix,
                    seconds=seconds,
                    connections=connections,
                )

            stock_ratios: list[float] = []
            ratios: list[float] = []
            served = 0
            commands_total: dict[str, float] = {}
            gafaelfawr_calls = 0
            for _ in range(repeats):
                for name, server in (
                    ("bare", bare),
                    ("bare_stock", stock),
                    ("bare_stock_logger", stock_logger),
                    ("bare_one_worker", one_worker),
                ):
                    runs[name].append(measured(server))
                runs["healthz"].append(
                    load(bench.url, admin, 1, "", "/healthz", seconds, connections)
                )
                # Every lab listed (an administrator's list), as the reference was measured.
                before_list = workers_cpu_seconds(bench.service)
                listed = load(bench.url, admin, 1, "", "/spawner/v1/labs", seconds, connections)
                listing = workers_cpu_seconds(bench.service) - before_list
                answered = int(listed.get("requests") or 0)
                listed["cpu_ms_per_request"] = (
                    round(listing * 1000 / answered, 3) if answered else None
                )
                runs["list"].append(listed)
                gafaelfawr_before = sum(bench.stack.gafaelfawr.requests.values())
                commands_before = redis_commands(bench)
                result = measured(bench.service)
                runs["status"].append(result)
                served += int(result["requests"])
                for name, count in command_delta(commands_before, redis_commands(bench), 1).items():
                    commands_total[name] = commands_total.get(name, 0) + count
                gafaelfawr_calls += (
                    sum(bench.stack.gafaelfawr.requests.values()) - gafaelfawr_before
                )
                bare_rate = runs["bare"][-1].get("requests_per_second") or 0
                status_rate = result.get("requests_per_second") or 0
                if bare_rate:
                    ratios.append(status_rate / bare_rate)
                stock_rate = runs["bare_stock"][-1].get("requests_per_second") or 0
                if stock_rate:
                    stock_ratios.append(status_rate / stock_rate)
            commands = {
                name: round(count / max(1, served), 2)
                for name, count in sorted(commands_total.items(), key=lambda item: -item[1])
            }
            rss = bench.service.worker_rss_kib()
            bare_rss = bare.worker_rss_kib()
        finally:
            bare.stop()
            stock.stop()
            stock_logger.stop()
            one_worker.stop()
        return {
            "records": records,
            "records_written": written,
            "records_written_by": "LabStore.put_if_idle (copies of a real spawn's record)",
            "sample_status_code": sample.status_code,
            "sample_body_bytes": len(sample.content),
            "tool": "wrk" if use_wrk else "bench.loadgen",
            "connections": connections,
            "seconds_per_target": seconds,
            "repeats": repeats,
            "workers": bench.settings.workers,
            "bare_route": _median_run(runs["bare"]),
            "service_healthz": _median_run(runs["healthz"]),
            "status_route": _median_run(runs["status"]),
            "list_route": _median_run(runs["list"]),
            "ratio_status_to_bare": round(median(ratios), 2) if ratios else None,
            "bare_route_stock_settings": _median_run(runs["bare_stock"]),
            "ratio_status_to_bare_stock": (
                round(median(stock_ratios), 3) if stock_ratios else None
            ),
            "bare_route_stock_logger": _median_run(runs["bare_stock_logger"]),
            "bare_route_one_worker": _median_run(runs["bare_one_worker"]),
            "run_queue_ms_per_second": {
                name: round(median(waits), 1)
                for name, values in runs.items()
                if (
                    waits := [
                        r["run_queue_ms_per_second"]
                        for r in values
                        if r.get("run_queue_ms_per_second") is not None
                    ]
                )
            },
            "cpu_ms_per_request": {
                name: round(median(spent), 3)
                for name, values in runs.items()
                if (
                    spent := [
                        r["cpu_ms_per_request"] for r in values if r.get("cpu_ms_per_request")
                    ]
                )
            },
            "ratio_per_repeat": [round(r, 2) for r in ratios],
            "requests_per_second_per_repeat": {
                name: [r.get("requests_per_second") for r in values]
                for name, values in runs.items()
            },
            "redis_commands_per_status_request": commands,
            "gafaelfawr_calls_during_status_run": gafaelfawr_calls,
            "worker_rss_kib_after_status_run": sorted(rss.values()),
            "bare_worker_rss_kib": sorted(bare_rss.values()),
            "service_log": log_findings(bench.service_log),
        }

"""Run the benchmarks: ``python -m bench.run`` (all) or ``--only latency,storm``.

Prints a summary, writes ``bench/results/<date>-<machine tag>.json`` and rewrites
``bench/RESULTS.md``. The whole set takes a few minutes on a 2-core machine. Benchmarks
report numbers; they never fail on a timing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.runtime.defaults import default_workers
from bench import (
    clusters,
    failover,
    fileservers,
    kernels,
    latency,
    machine,
    prepull,
    replicas,
    report,
    restart,
    scale,
    status,
    storm,
    streams,
)

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
ALL = (
    "latency",
    "latency_5ms",
    "latency_slow_kubelet",
    "storm",
    "storm_5ms",
    "storm_slow_kubelet",
    "status",
    "streams_1000",
    "streams",
    "restart",
    "prepull",
    "clusters",
    "clusters_5ms",
    "kernels",
    "kernels_5ms",
    "replicas",
    "scale",
    "scale_5ms",
    "redis_failover",
    "fileservers",
)
"""``_5ms``: at a realistic API latency (``--api-latency-ms``); ``_slow_kubelet``: that
latency and a kubelet taking ``--slow-start-seconds`` to start a lab; ``streams_1000``:
1,000 streams, as the reference was measured with (``streams``: ``--streams``);
``clusters``: users' compute clusters created, scaled and deleted all at once;
``kernels``: a remote kernel's start to its first reply, beside a local kernel's;
``replicas``: storms and status through the balancer with 1, 2 and 3 replicas, and how fast
a dead leader replica's loops lead elsewhere;
``scale``: the watcher, reconcile, prepuller, rebuild, Redis memory and status against
emulated populations of 1,000 to 10,000 labs (``--scale-labs``); ``redis_failover``: spawns
while Redis behind Sentinel loses its primary (killed, or failed over on command), the time
until a spawn is accepted through the new primary and the 503s until then; ``fileservers``:
a user's file server from ``GET /files`` to its first listing, and a large file up and down
through the ingress beside a local ``cp``."""


def _code_version() -> dict[str, Any]:
    """The commit measured, and how many files differ from it (outside ``bench/``)."""
    override = os.environ.get("BENCH_CODE_VERSION")
    if override:
        return {"commit": override, "uncommitted_files": 0}
    root = BENCH_DIR.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return {"commit": "unknown", "uncommitted_files": None}
    dirty = [line for line in changes if not line[3:].startswith("bench/")]
    return {"commit": commit, "uncommitted_files": len(dirty)}


def _load_average() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def _carry_over(results: dict[str, Any], chosen: list[str], tag: str) -> None:
    """A run of a subset keeps the other benchmarks' latest figures from this machine, each
    marked with the run it came from, so RESULTS.md always shows every benchmark. The latest
    run is the newest by its date, labelled (``--label``) or not."""
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in RESULTS_DIR.glob(f"*-{tag}*.json")]
    if not runs:
        return
    previous = max(runs, key=lambda run: str(run.get("date") or ""))
    for name, result in (previous.get("benchmarks") or {}).items():
        if name not in chosen and name not in results["benchmarks"]:
            carried = result.get("carried_from") or previous.get("date")
            results["benchmarks"][name] = {**result, "carried_from": carried}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument(
        "--only",
        default=",".join(ALL),
        help=f"comma-separated subset of: {', '.join(ALL)} (memory is measured by all)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="gunicorn workers of the service; default: the service's own, one per usable "
        f"core ({default_workers()} here), and {status.YARDSTICK_WORKERS} for status "
        "(see bench.status)",
    )
    parser.add_argument(
        "--spawns",
        type=int,
        default=50,
        help="sequential spawns, each followed by a floor replay (latency)",
    )
    parser.add_argument("--storm-users", type=int, default=300, help="users spawning at once")
    parser.add_argument("--records", type=int, default=1000, help="lab records (status)")
    parser.add_argument("--status-seconds", type=float, default=8.0, help="per load run")
    parser.add_argument("--status-repeats", type=int, default=3, help="interleaved load runs")
    parser.add_argument("--connections", type=int, default=64, help="load connections (status)")
    parser.add_argument(
        "--load-tool", choices=("auto", "wrk", "python"), default="auto", help="status load"
    )
    parser.add_argument("--streams", type=int, default=2000, help="event streams (one worker)")
    parser.add_argument("--restart-labs", type=int, default=430, help="labs running (restart)")
    parser.add_argument("--rounds", type=int, default=20, help="broadcast rounds (streams)")
    parser.add_argument("--prepull-nodes", type=int, default=200, help="nodes (prepull)")
    parser.add_argument("--prepull-images", type=int, default=10, help="images (prepull)")
    parser.add_argument(
        "--pull-seconds", type=float, default=0.5, help="simulated pull time (prepull)"
    )
    parser.add_argument(
        "--scale-labs",
        default=",".join(str(n) for n in scale.SIZES),
        help="comma-separated population sizes, in labs (scale)",
    )
    parser.add_argument(
        "--scale-nodes", type=int, default=scale.NODES, help="nodes of each population (scale)"
    )
    parser.add_argument(
        "--replica-users",
        type=int,
        default=200,
        help="users of each storm through the balancer (replicas)",
    )
    parser.add_argument(
        "--kernel-rounds",
        type=int,
        default=10,
        help="remote and local kernels started, one at a time (kernels)",
    )
    parser.add_argument(
        "--failover-runs",
        type=int,
        default=5,
        help="primaries killed, and half as many failovers on command (redis_failover)",
    )
    parser.add_argument(
        "--cluster-users", type=int, default=50, help="users with a cluster each (clusters)"
    )
    parser.add_argument(
        "--fileserver-rounds", type=int, default=5, help="file servers started (fileservers)"
    )
    parser.add_argument(
        "--fileserver-mb", type=int, default=100, help="MB of the file moved (fileservers)"
    )
    parser.add_argument(
        "--cluster-max-workers",
        type=int,
        default=4,
        help="workers each cluster is scaled up to, and its budget (clusters)",
    )
    parser.add_argument(
        "--cluster-poll-seconds",
        type=float,
        default=0.1,
        help="how often the client reads a cluster it waits for (clusters)",
    )
    parser.add_argument(
        "--api-latency-ms",
        type=float,
        default=5.0,
        help="milliseconds each Kubernetes call waits (the _5ms benchmarks, slow kubelet)",
    )
    parser.add_argument(
        "--slow-start-seconds",
        type=float,
        default=2.0,
        help="the kubelet's start time (latency_slow_kubelet)",
    )
    parser.add_argument(
        "--slow-spawns", type=int, default=10, help="sequential spawns (latency_slow_kubelet)"
    )
    parser.add_argument(
        "--compare",
        type=Path,
        help="a previous result file (bench/results/*.json) to show beside this run",
    )
    parser.add_argument(
        "--label",
        help="names the results file <date>-<machine>-<label>.json, kept beside the daily one",
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print only; leave results files alone"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in ALL]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(ALL)}")
        return 2
    api_latency = args.api_latency_ms / 1000
    scale_sizes = tuple(int(n) for n in args.scale_labs.split(",") if n.strip())
    workers = args.workers or default_workers()
    runners: dict[str, Callable[[Path], dict[str, Any]]] = {
        "latency": lambda w: latency.run(w, spawns=args.spawns, workers=workers),
        "latency_5ms": lambda w: latency.run(
            w, spawns=args.spawns, api_latency=api_latency, workers=workers
        ),
        "latency_slow_kubelet": lambda w: latency.run(
            w,
            spawns=args.slow_spawns,
            api_latency=api_latency,
            start_seconds=args.slow_start_seconds,
            workers=workers,
        ),
        "storm": lambda w: storm.run(w, users=args.storm_users, workers=workers),
        "storm_5ms": lambda w: storm.run(
            w, users=args.storm_users, api_latency=api_latency, workers=workers
        ),
        "storm_slow_kubelet": lambda w: storm.run(
            w,
            users=args.storm_users,
            api_latency=api_latency,
            start_seconds=args.slow_start_seconds,
            workers=workers,
        ),
        "status": lambda w: status.run(
            w,
            records=args.records,
            seconds=args.status_seconds,
            connections=args.connections,
            repeats=args.status_repeats,
            tool={"python": "loadgen"}.get(args.load_tool, args.load_tool),
            workers=args.workers or status.YARDSTICK_WORKERS,
        ),
        "streams_1000": lambda w: streams.run(w, streams=1000, rounds=args.rounds),
        "streams": lambda w: streams.run(w, streams=args.streams, rounds=args.rounds),
        "restart": lambda w: restart.run(w, labs=args.restart_labs, workers=workers),
        "prepull": lambda w: prepull.run(
            w, nodes=args.prepull_nodes, images=args.prepull_images, pull_seconds=args.pull_seconds
        ),
        "clusters": lambda w: clusters.run(
            w,
            users=args.cluster_users,
            max_workers=args.cluster_max_workers,
            workers=workers,
            poll_seconds=args.cluster_poll_seconds,
        ),
        "clusters_5ms": lambda w: clusters.run(
            w,
            users=args.cluster_users,
            max_workers=args.cluster_max_workers,
            api_latency=api_latency,
            workers=workers,
            poll_seconds=args.cluster_poll_seconds,
        ),
        "kernels": lambda w: kernels.run(w, rounds=args.kernel_rounds),
        "replicas": lambda w: replicas.run(w, users=args.replica_users),
        "kernels_5ms": lambda w: kernels.run(w, rounds=args.kernel_rounds, api_latency=api_latency),
        "scale": lambda w: scale.run(w, scale_sizes, nodes=args.scale_nodes),
        "redis_failover": lambda w: failover.run(
            w,
            kill_runs=args.failover_runs,
            failover_runs=max(1, (args.failover_runs + 1) // 2),
            workers=workers,
        ),
        "fileservers": lambda w: fileservers.run(
            w, rounds=args.fileserver_rounds, size_mb=args.fileserver_mb
        ),
        "scale_5ms": lambda w: scale.run(
            w, scale_sizes, nodes=args.scale_nodes, api_latency=api_latency
        ),
    }
    description = machine.describe()
    started = time.monotonic()
    results: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": description,
        "code": _code_version(),
        "command": "python -m bench.run " + " ".join(argv if argv is not None else sys.argv[1:]),
        "benchmarks": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for name in chosen:
            print(f"== {name}", flush=True)
            load = _load_average()
            begun = time.monotonic()
            try:
                result = runners[name](Path(tmp))
            except Exception as exc:  # one broken benchmark must not lose the others
                traceback.print_exc()
                result = {"error": f"{type(exc).__name__}: {exc}"}
            result["load_average_before"] = load
            result["benchmark_seconds"] = round(time.monotonic() - begun, 1)
            results["benchmarks"][name] = result
            print(report.summary_line(name, result), flush=True)
    results["duration_seconds"] = round(time.monotonic() - started, 1)
    _carry_over(results, chosen, machine.tag(description))
    if args.compare is not None:
        before = json.loads(args.compare.read_text(encoding="utf-8"))
        results["compared_with"] = {
            "file": args.compare.name,
            "code": before.get("code"),
            "date": before.get("date"),
            "benchmarks": before.get("benchmarks") or {},
        }
    print(report.summary(results))
    if not args.no_write:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        day = results["date"][:10]
        label = f"-{args.label}" if args.label else ""
        path = RESULTS_DIR / f"{day}-{machine.tag(description)}{label}.json"
        path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        (BENCH_DIR / "RESULTS.md").write_text(report.markdown(results), encoding="utf-8")
        print(f"wrote bench/results/{path.name} and bench/RESULTS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

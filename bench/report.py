"""Turn a run's results into the terminal summary and ``bench/RESULTS.md``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench import machine
from bench.goals import EARLIER_SITTING, Reference, evaluate, reference_for

REFERENCE = {
    "latency": "p50 43 ms, p95 51 ms; floor about 21 ms (about 14 calls)",
    "storm": "100 at once 2.6 s; 300 at once 6.7-9.6 s; one spawn hung in seven runs",
    "status": "5,661 requests/s, 0.54 of a bare route",
    "delete": "p50 15 ms",
}


def _get(data: dict[str, Any], *keys: str) -> Any:
    value: Any = data
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _fmt(value: Any, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{unit}"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value}{unit}"


def _workers(result: dict[str, Any]) -> str:
    """``1 worker``, ``2 web workers and the runner``: the service's processes in a
    benchmark (the runners where it recorded them; results from before the runner was one
    process of its own give its workers)."""
    count = result.get("workers")
    if count is None:
        return "its default workers"
    if result.get("runner_process"):
        return f"{count} web worker" + ("" if count == 1 else "s") + " and the runner"
    runners = result.get("runners")
    if runners is None:
        return f"{count} worker" + ("" if count == 1 else "s")
    return f"{count} web and {runners} runner worker" + ("" if count + runners == 1 else "s")


def _mib(kib: Any) -> str:
    if not kib:
        return "n/a"
    values = kib if isinstance(kib, list) else [kib]
    return " / ".join(f"{v / 1024:.0f}" for v in values) + " MiB"


def summary_line(name: str, result: dict[str, Any]) -> str:
    if "error" in result:
        return f"   {name}: ERROR {result['error']}"
    if name.startswith("latency"):
        return (
            f"   spawn p50 {_fmt(_get(result, 'latency', 'p50_ms'), ' ms')}, "
            f"p95 {_fmt(_get(result, 'latency', 'p95_ms'), ' ms')}; floor "
            f"{_fmt(_get(result, 'floor', 'api_ms', 'p50_ms'), ' ms')} for "
            f"{_fmt(_get(result, 'floor', 'calls'))} calls; ratio "
            f"{_fmt(result.get('ratio_p50_to_floor'), '', 2)}; failures {result.get('failures')}"
        )
    if name.startswith("storm"):
        spawn = result.get("spawn") or {}
        integrity = result.get("integrity_after_spawn") or {}
        return (
            f"   {spawn.get('users')} users: all done in "
            f"{_fmt(spawn.get('total_seconds'), ' s', 2)}, completed {spawn.get('completed')}, "
            f"failed {spawn.get('failed')}; duplicate pods "
            f"{integrity.get('users_with_duplicate_pods')}, orphans "
            f"{integrity.get('orphan_namespace_count')}; delete all "
            f"{_fmt(_get(result, 'delete', 'total_seconds'), ' s', 2)}, clean "
            f"{_get(result, 'after_delete', 'clean')}"
        )
    if name == "status":
        return (
            f"   status {_fmt(_get(result, 'status_route', 'requests_per_second'), '/s', 0)} vs "
            f"bare {_fmt(_get(result, 'bare_route', 'requests_per_second'), '/s', 0)}: ratio "
            f"{_fmt(result.get('ratio_status_to_bare'), '', 2)}"
        )
    if name.startswith("streams"):
        return (
            f"   held {result.get('held_open')} of {result.get('streams_requested')} streams; "
            f"delivery p50 {_fmt(_get(result, 'delivery_latency', 'p50_ms'), ' ms')}, p99 "
            f"{_fmt(_get(result, 'delivery_latency', 'p99_ms'), ' ms')}"
        )
    if name == "restart":
        return (
            f"   {result.get('labs')} labs: full list "
            f"{_fmt(_get(result, 'redis_kept', 'seconds_to_full_list'), ' s', 2)} with Redis "
            f"kept, {_fmt(_get(result, 'redis_empty', 'seconds_to_full_list'), ' s', 2)} "
            "rebuilt from Kubernetes"
        )
    if name.startswith("clusters"):
        return (
            f"   {_get(result, 'create', 'running')} of {_get(result, 'create', 'clusters')} "
            f"clusters running after {_fmt(_get(result, 'create', 'all_running_seconds'), ' s', 2)}"
            f" (POST p50 {_fmt(_get(result, 'create', 'post_answered', 'p50_ms'), ' ms')}); "
            f"scale up p50 {_fmt(_get(result, 'scale_up', 'request', 'p50_ms'), ' ms')}, pods in "
            f"{_fmt(_get(result, 'scale_up', 'pods_at_count_seconds'), ' s', 2)}; down p50 "
            f"{_fmt(_get(result, 'scale_down', 'request', 'p50_ms'), ' ms')}, pods in "
            f"{_fmt(_get(result, 'scale_down', 'pods_at_count_seconds'), ' s', 2)}; delete all "
            f"{_fmt(_get(result, 'delete', 'all_unlisted_seconds'), ' s', 2)}"
        )
    if name == "redis_failover":
        return (
            f"   primary killed: spawns accepted again after "
            f"{_fmt(_get(result, 'kill', 'first_spawn_accepted_median_seconds'), ' s', 2)} "
            f"(median; new primary named after "
            f"{_fmt(_get(result, 'kill', 'new_primary_named_median_seconds'), ' s', 2)}, "
            f"{_fmt(_get(result, 'kill', 'unavailable_503_median'), '', 0)} 503s); "
            f"SENTINEL FAILOVER: after "
            f"{_fmt(_get(result, 'failover', 'first_spawn_accepted_median_seconds'), ' s', 2)} "
            f"({_fmt(_get(result, 'failover', 'unavailable_503_median'), '', 0)} 503s)"
        )
    if name == "replicas":
        counts = result.get("by_replicas") or {}
        storms = ", ".join(
            f"{count}: {_fmt(r.get('storm_seconds_median'), ' s', 2)}"
            for count, r in counts.items()
        )
        rates = ", ".join(
            f"{count}: {_fmt(r.get('status_requests_per_second_median'), '/s', 0)}"
            for count, r in counts.items()
        )
        return (
            f"   storm of {result.get('users')} by replicas {storms}; status {rates}; "
            f"leader moved in {_fmt(_get(result, 'leader_failover_seconds', 'median'), ' s', 2)} "
            f"(median; lease {_fmt(result.get('lease_seconds'), ' s', 0)})"
        )
    if name.startswith("kernels"):
        return (
            f"   first reply p50: remote "
            f"{_fmt(_get(result, 'remote', 'first_reply', 'p50_ms'), ' ms')}, local "
            f"{_fmt(_get(result, 'local', 'first_reply', 'p50_ms'), ' ms')} "
            f"({_fmt(result.get('first_reply_ratio_p50'), '', 2)} x); remote shutdown p50 "
            f"{_fmt(_get(result, 'remote', 'shutdown', 'p50_ms'), ' ms')}"
        )
    if name.startswith("scale"):
        goal = result.get("rebuild_goal") or {}
        growth = result.get("growth") or {}
        worse = [label for label, g in growth.items() if g.get("verdict") == "worse than linear"]
        return (
            f"   sizes {result.get('sizes')}: rebuild of {goal.get('labs')} labs "
            f"{_fmt(goal.get('seconds'), ' s', 2)} (goal under {goal.get('goal_seconds')} s); "
            f"worse than linear: {', '.join(worse) or 'none'}; passes listing per user: "
            f"{'; '.join(result.get('passes_listing_per_user') or []) or 'none'}"
        )
    if name == "prepull":
        return (
            f"   {result.get('nodes')} nodes x {result.get('images')} images: full in "
            f"{_fmt(_get(result, 'fill', 'seconds'), ' s', 2)} (floor "
            f"{_fmt(_get(result, 'fill', 'floor_seconds'), ' s', 2)}); steady pass p50 "
            f"{_fmt(_get(result, 'steady_pass', 'p50_ms'), ' ms')}, "
            f"{_get(result, 'steady_pass', 'kubernetes_calls')} Kubernetes calls"
        )
    if name == "fileservers":
        return (
            f"   GET /files to first PROPFIND p50 "
            f"{_fmt(_get(result, 'get_files_to_first_propfind', 'p50_ms'), ' ms')}; "
            f"{result.get('size_mb')} MB up {_fmt(result.get('upload_mb_per_s_p50'), ' MB/s')}, "
            f"down {_fmt(result.get('download_mb_per_s_p50'), ' MB/s')}, local cp "
            f"{_fmt(result.get('local_cp_mb_per_s_p50'), ' MB/s')}"
        )
    return f"   {name}: done"


def summary(results: dict[str, Any]) -> str:
    lines = [f"== summary ({results['duration_seconds']} s)"]
    for name, result in results["benchmarks"].items():
        lines.append(f"{name}:")
        lines.append(summary_line(name, result))
    lines.append("== goals")
    for goal in evaluate(results["benchmarks"], _reference(results)):
        lines.append(f"   {goal.verdict:>12}: {goal.figure}: {goal.measured} (goal: {goal.goal})")
    return "\n".join(lines)


def _reference(results: dict[str, Any]) -> Reference:
    """The reference measured on the run's kind of machine."""
    described = results.get("machine")
    return reference_for(machine.tag(described) if isinstance(described, dict) else None)


def _goals(results: dict[str, Any]) -> list[str]:
    """Each goal with this run's figure, the reference's, and met or not met."""
    reference = _reference(results)
    rows = [
        "## Goals",
        "",
        "The reference is nublado controller 9.0.3 (one uvicorn process, state in memory),",
        f'measured {reference.measured}; the figures marked "{EARLIER_SITTING}" come from',
        "before. What each figure means is on the documentation's benchmark page.",
        "",
        "| Figure | This run | Reference | Goal | |",
        "|---|---|---|---|---|",
    ]
    for goal in evaluate(results["benchmarks"], reference):
        rows.append(
            f"| {goal.figure} | {goal.measured} | {goal.reference} | {goal.goal} | {goal.verdict} |"
        )
    return [*rows, "", *_carried(results)]


def _carried(results: dict[str, Any]) -> list[str]:
    """Which figures here (the goals' and the overview's too) come from earlier runs: a run
    of a subset carries the others', which may have measured other code."""
    runs: dict[str, list[str]] = {}
    for name, result in results["benchmarks"].items():
        if result.get("carried_from"):
            runs.setdefault(str(result["carried_from"]), []).append(name)
    if not runs:
        return []
    return [
        "Not run this time, so carried from an earlier run on this machine (with the code of "
        "that run): "
        + "; ".join(f"{', '.join(names)} (run of {date})" for date, names in sorted(runs.items()))
        + ".",
        "",
    ]


def _machine(results: dict[str, Any]) -> list[str]:
    m = results["machine"]
    code = results.get("code") or {}
    dirty = code.get("uncommitted_files")
    version = str(code.get("commit"))
    if dirty:
        version += f" plus {dirty} uncommitted files"
    loads = {
        name: " ".join(str(x) for x in r.get("load_average_before") or [])
        for name, r in results["benchmarks"].items()
    }
    return [
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        f"| CPU | {m['cpu_model']} |",
        f"| Cores | {m['cores']} |",
        f"| Memory | {m['memory_gib']} GiB |",
        f"| Python | {m['python']} ({m['implementation']}) |",
        f"| System | {m['system']} |",
        f"| Code measured | {version} |",
        f"| Date | {results['date']} |",
        "| Load average before each benchmark | "
        + "; ".join(f"{k}: {v}" for k, v in loads.items())
        + " |",
        "",
        "Everything shares these cores: the Kubernetes, Gafaelfawr and registry emulators run as",
        "threads of the benchmark's own process, Redis and gunicorn beside it, and the load",
        "clients in their own processes. Figures drift with the machine and with anything else",
        "running on it; compare ratios measured in one run.",
        "",
    ]


def _overview(results: dict[str, Any]) -> list[str]:
    b = results["benchmarks"]
    rows = [
        "## Overview",
        "",
        "| Benchmark | Measured | Goal | Reference (nublado 9.0.3, same kind of machine) |",
        "|---|---|---|---|",
    ]
    lat = b.get("latency")
    if lat and "error" not in lat:
        rows.append(
            f"| Spawn latency, instant kubelet | p50 {_fmt(_get(lat, 'latency', 'p50_ms'), ' ms')}"
            f", p95 {_fmt(_get(lat, 'latency', 'p95_ms'), ' ms')}; floor "
            f"{_fmt(_get(lat, 'floor', 'api_ms', 'p50_ms'), ' ms')} for "
            f"{_fmt(_get(lat, 'floor', 'calls'))} calls; p50 = "
            f"{_fmt(lat.get('ratio_p50_to_floor'), '', 2)} x floor | p50 within 1.5 x floor | "
            f"{REFERENCE['latency']} |"
        )
        rows.append(
            f"| Delete latency | p50 {_fmt(_get(lat, 'delete_latency', 'p50_ms'), ' ms')}, p95 "
            f"{_fmt(_get(lat, 'delete_latency', 'p95_ms'), ' ms')}; the service's share "
            f"p50 {_fmt(_get(lat, 'delete_service_share', 'p50_ms'), ' ms')}, the rest the "
            "emulator keeping the namespace terminating (a delete ends when it is gone) | "
            "beat the reference | "
            f"{REFERENCE['delete']} |"
        )
    st = b.get("storm")
    if st and "error" not in st:
        spawn = st.get("spawn") or {}
        integ = st.get("integrity_after_spawn") or {}
        rows.append(
            f"| Spawn storm, {spawn.get('users')} users, {_workers(st)} | all done in "
            f"{_fmt(spawn.get('total_seconds'), ' s', 2)}; {spawn.get('failed')} failed; "
            f"{integ.get('users_with_duplicate_pods')} duplicate pods, "
            f"{integ.get('orphan_namespace_count')} orphan namespaces; cluster clean after "
            f"deleting all: {_get(st, 'after_delete', 'clean')} | no failure, no duplicate or "
            f"orphan, clean | {REFERENCE['storm']} |"
        )
    stat = b.get("status")
    if stat and "error" not in stat:
        rows.append(
            f"| Status throughput, {stat.get('records')} records | "
            f"{_fmt(_get(stat, 'status_route', 'requests_per_second'), '/s', 0)} = "
            f"{_fmt(stat.get('ratio_status_to_bare'), '', 2)} x bare route "
            f"({_fmt(_get(stat, 'bare_route', 'requests_per_second'), '/s', 0)}) | at least 0.5 x "
            f"bare | {REFERENCE['status']} |"
        )
    ev = b.get("streams")
    if ev and "error" not in ev:
        rows.append(
            f"| Event streams, one worker | held {ev.get('held_open')} of "
            f"{ev.get('streams_requested')}; one event to all: p50 "
            f"{_fmt(_get(ev, 'delivery_latency', 'p50_ms'), ' ms')}, p99 "
            f"{_fmt(_get(ev, 'delivery_latency', 'p99_ms'), ' ms')} | 2,000 per worker, p99 "
            f"under 100 ms | not measured |"
        )
    pp = b.get("prepull")
    if pp and "error" not in pp:
        rows.append(
            f"| Prepuller, {pp.get('nodes')} nodes x {pp.get('images')} images | decision pass "
            f"p50 {_fmt(_get(pp, 'steady_pass', 'p50_ms'), ' ms')} with "
            f"{_get(pp, 'steady_pass', 'kubernetes_calls')} Kubernetes calls; fully prepulled in "
            f"{_fmt(_get(pp, 'fill', 'seconds'), ' s', 2)} = "
            f"{_fmt(_get(pp, 'fill', 'ratio_to_floor'), '', 2)} x floor "
            f"({_fmt(_get(pp, 'fill', 'floor_seconds'), ' s', 1)}) | (report) | not measured |"
        )
    cl = b.get("clusters")
    if cl and "error" not in cl:
        rows.append(
            f"| Compute clusters, {cl.get('users')} users at once, {_workers(cl)} | all "
            f"running {_fmt(_get(cl, 'create', 'all_running_seconds'), ' s', 2)} after the "
            f"first POST; scale PATCH p50 {_fmt(_get(cl, 'scale_up', 'request', 'p50_ms'), ' ms')}"
            f"; all deleted {_fmt(_get(cl, 'delete', 'all_unlisted_seconds'), ' s', 2)}; "
            f"{_fmt(_get(cl, 'kubernetes_calls', 'create', 'total_per_cluster'), '', 1)} "
            "Kubernetes calls a create | (report) | not measured |"
        )
    ke = b.get("kernels")
    if ke and "error" not in ke:
        rows.append(
            f"| Remote kernel, `start_kernel` to the first execute reply | p50 "
            f"{_fmt(_get(ke, 'remote', 'first_reply', 'p50_ms'), ' ms')} against a local "
            f"kernel's {_fmt(_get(ke, 'local', 'first_reply', 'p50_ms'), ' ms')} = "
            f"{_fmt(ke.get('first_reply_ratio_p50'), '', 2)} x | (report) | not measured |"
        )
    memory = _memory_rows(b)
    if memory:
        rows.append(f"| Memory per worker (RSS) | {memory} | | |")
    return [*rows, ""]


_REALISTIC_ROWS: list[tuple[str, str, tuple[str, ...], str, int]] = [
    ("Spawn p50", "latency", ("latency", "p50_ms"), " ms", 1),
    ("Spawn p95", "latency", ("latency", "p95_ms"), " ms", 1),
    ("Floor (the spawn's calls replayed), p50", "latency", ("floor", "api_ms", "p50_ms"), " ms", 1),
    ("Spawn p50 / floor", "latency", ("ratio_p50_to_floor",), "", 2),
    ("Delete p50", "latency", ("delete_latency", "p50_ms"), " ms", 1),
    ("Storm: every spawn complete", "storm", ("spawn", "total_seconds"), " s", 2),
    ("Storm: a POST answered, p50", "storm", ("spawn", "request_answered", "p50_ms"), " ms", 1),
    ("Storm: one user's spawn, p50", "storm", ("spawn", "per_user", "p50_ms"), " ms", 1),
    ("Storm: delete all", "storm", ("delete", "total_seconds"), " s", 2),
]
_SLOW_STORM_ROWS: list[tuple[str, tuple[str, ...], str, int]] = [
    ("every spawn complete", ("spawn", "total_seconds"), " s", 2),
    ("one user's spawn, p50", ("spawn", "per_user", "p50_ms"), " ms", 0),
    ("a POST answered, p50", ("spawn", "request_answered", "p50_ms"), " ms", 0),
]
"""Rows of the realistic-latency table: label, benchmark, keys into its result, unit,
digits. The instant-API column reads ``<benchmark>``, the other ``<benchmark>_5ms``."""


def _realistic(results: dict[str, Any]) -> list[str]:
    """The same benchmarks with an instant API and with a realistic one, and with a slow
    kubelet."""
    b = results["benchmarks"]
    if not any(name.endswith("_5ms") or name.endswith("_slow_kubelet") for name in b):
        return []
    latency_ms = _get(b, "latency_5ms", "api_latency_ms") or _get(b, "storm_5ms", "api_latency_ms")
    head = ["", "Instant API", f"API at {_fmt(latency_ms, ' ms', 0)} a call"]
    lines = [
        "## Realistic latency",
        "",
        "The emulator answers a call in about a millisecond; a real API server takes a few.",
        "The same benchmarks with every Kubernetes call delayed (`--api-latency-ms`), so that",
        "what a user would feel is judged where the calls cost what they cost in a cluster.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for label, name, keys, unit, digits in _REALISTIC_ROWS:
        cells = [label]
        for key in (name, f"{name}_5ms"):
            cells.append(_fmt(_get(b.get(key) or {}, *keys), unit, digits))
        lines.append("| " + " | ".join(cells) + " |")
    slow = b.get("latency_slow_kubelet")
    if slow and "error" not in slow:
        start = slow.get("kubelet_start_seconds") or 0
        p50 = _get(slow, "latency", "p50_ms")
        over = p50 - start * 1000 if isinstance(p50, (int, float)) else None
        lines += [
            "",
            f"With a kubelet taking {_fmt(start, ' s', 0)} to start a lab, and the API at "
            f"{_fmt(slow.get('api_latency_ms'), ' ms', 0)} a call, {slow.get('spawns')} spawns: "
            f"p50 {_fmt(p50, ' ms')}, p95 {_fmt(_get(slow, 'latency', 'p95_ms'), ' ms')}, "
            f"so {_fmt(over, ' ms')} of a spawn is not the kubelet's start (p50).",
        ]
    storm = b.get("storm_slow_kubelet")
    if storm and "error" not in storm:
        figures = ", ".join(
            f"{label} {_fmt(_get(storm, *keys), unit, digits)}"
            for label, keys, unit, digits in _SLOW_STORM_ROWS
        )
        lines += [
            "",
            f"A storm of {_get(storm, 'spawn', 'users')} with that kubelet and API: {figures}.",
        ]
    return [*lines, ""]


KEY_FIGURES: list[tuple[str, str, tuple[str, ...], str, int, bool]] = [
    ("Spawn p50, instant API", "latency", ("latency", "p50_ms"), " ms", 1, False),
    ("Spawn p95, instant API", "latency", ("latency", "p95_ms"), " ms", 1, False),
    ("Spawn p50, realistic API", "latency_5ms", ("latency", "p50_ms"), " ms", 1, False),
    ("Spawn p95, realistic API", "latency_5ms", ("latency", "p95_ms"), " ms", 1, False),
    ("Delete p50, realistic API", "latency_5ms", ("delete_latency", "p50_ms"), " ms", 1, False),
    ("Spawn p50, slow kubelet", "latency_slow_kubelet", ("latency", "p50_ms"), " ms", 1, False),
    ("Storm, instant API: all complete", "storm", ("spawn", "total_seconds"), " s", 2, False),
    (
        "Storm, instant API: one user's spawn p50",
        "storm",
        ("spawn", "per_user", "p50_ms"),
        " ms",
        0,
        False,
    ),
    (
        "Storm, instant API: POST answered p50",
        "storm",
        ("spawn", "request_answered", "p50_ms"),
        " ms",
        0,
        False,
    ),
    ("Storm, realistic API: all complete", "storm_5ms", ("spawn", "total_seconds"), " s", 2, False),
    (
        "Storm, realistic API: one user's spawn p50",
        "storm_5ms",
        ("spawn", "per_user", "p50_ms"),
        " ms",
        0,
        False,
    ),
    (
        "Storm, realistic API: POST answered p50",
        "storm_5ms",
        ("spawn", "request_answered", "p50_ms"),
        " ms",
        0,
        False,
    ),
    ("Storm, realistic API: delete all", "storm_5ms", ("delete", "total_seconds"), " s", 2, False),
    (
        "Storm, instant API: peak memory, RSS of every process",
        "storm",
        ("service_memory_kib", "peak_during_spawn_storm", "rss"),
        " KiB",
        0,
        False,
    ),
    (
        "Storm, instant API: peak memory, PSS of every process",
        "storm",
        ("service_memory_kib", "peak_during_spawn_storm", "pss"),
        " KiB",
        0,
        False,
    ),
    (
        "Storm, instant API: peak memory, each resident page once",
        "storm",
        ("service_memory_kib", "peak_during_spawn_storm", "distinct"),
        " KiB",
        0,
        False,
    ),
    ("Restart to a full list", "restart", ("redis_kept", "seconds_to_full_list"), " s", 2, False),
    ("Status requests/s", "status", ("status_route", "requests_per_second"), "/s", 0, True),
    ("Status / bare route", "status", ("ratio_status_to_bare",), "", 2, True),
    ("Status p99", "status", ("status_route", "latency_ms", "p99"), " ms", 1, False),
    ("Event delivery p50", "streams", ("delivery_latency", "p50_ms"), " ms", 1, False),
    ("Event delivery p99", "streams", ("delivery_latency", "p99_ms"), " ms", 1, False),
    ("Streams: worker CPU a round", "streams", ("worker_cpu_ms_per_round",), " ms", 1, False),
    ("Prepull: every node has every image", "prepull", ("fill", "seconds"), " s", 2, False),
    (
        "Clusters, realistic API: all running",
        "clusters_5ms",
        ("create", "all_running_seconds"),
        " s",
        2,
        False,
    ),
    (
        "Clusters, realistic API: scale PATCH p50",
        "clusters_5ms",
        ("scale_up", "request", "p50_ms"),
        " ms",
        1,
        False,
    ),
    (
        "Clusters, realistic API: delete all",
        "clusters_5ms",
        ("delete", "all_unlisted_seconds"),
        " s",
        2,
        False,
    ),
]
"""The figures a user would feel, one per row: label, benchmark, keys into its result,
unit, digits, and whether higher is better (for the comparison of two runs)."""


def key_figures(benchmarks: dict[str, Any]) -> dict[str, float]:
    """Each of ``KEY_FIGURES`` a run measured (benchmarks that failed or were carried over
    from another run are left out), by label."""
    figures: dict[str, float] = {}
    for label, name, keys, _unit, _digits, _higher in KEY_FIGURES:
        result = benchmarks.get(name) or {}
        if "error" in result or result.get("carried_from"):
            continue
        value = _get(result, *keys)
        if isinstance(value, (int, float)):
            figures[label] = float(value)
    return figures


def _comparison(results: dict[str, Any]) -> list[str]:
    """This run's key figures beside those of the run it was compared with (``--compare``)."""
    compared = results.get("compared_with")
    if not compared:
        return []
    before = key_figures(compared.get("benchmarks") or {})
    after = key_figures(results["benchmarks"])
    code = (compared.get("code") or {}).get("commit")
    now = (results.get("code") or {}).get("commit")
    lines = [
        "## Compared with an earlier run",
        "",
        f"Before: `{compared.get('file')}` (code {code}, {compared.get('date')}); after: this "
        f"run (code {now}). Realistic API: every Kubernetes call delayed by "
        f"{_fmt(_get(results['benchmarks'], 'latency_5ms', 'api_latency_ms'), ' ms', 0)}; "
        "slow kubelet: "
        f"{_fmt(_get(results['benchmarks'], 'latency_slow_kubelet', 'kubelet_start_seconds'))}"
        " s to start a lab. Single runs drift by several percent on a shared machine: read a",
        "few percent as noise.",
        "",
        "| Measure | Before | After | After / before |",
        "|---|---|---|---|",
    ]
    for label, _name, _keys, unit, digits, higher in KEY_FIGURES:
        if label not in before and label not in after:
            continue
        old, new = before.get(label), after.get(label)
        ratio = ""
        if old and new is not None:
            ratio = f"{new / old:.2f}"
            if abs(new / old - 1) >= 0.05:
                ratio += " (better)" if (new > old) == higher else " (worse)"
        lines.append(
            f"| {label} | {_fmt(old, unit, digits)} | {_fmt(new, unit, digits)} | {ratio} |"
        )
    return [*lines, ""]


CLUSTER_VARIANTS = {"clusters": "Instant API", "clusters_5ms": "API at {latency} a call"}
"""The cluster benchmarks shown side by side, and their columns' headings."""
CREATE_CALL = "create daskclusters"
CLUSTER_PHASES = {
    "create": "create",
    "scale_up": "scale up",
    "scale_down": "scale down",
    "delete": "delete",
}


def _spread(summary: Any) -> str:
    """``p50 / p95 / max`` of a latency summary, in milliseconds."""
    if not isinstance(summary, dict) or not summary.get("count"):
        return "n/a"
    figures = [_fmt(summary.get(key), "", 0) for key in ("p50_ms", "p95_ms", "max_ms")]
    return " / ".join(figures) + " ms"


def _not_ok(result: dict[str, Any], phase: str, ok: str) -> str:
    """Outcomes of a phase other than ``ok``, or "none"."""
    outcomes = _get(result, phase, "outcomes") or {}
    bad = {k: v for k, v in outcomes.items() if k != ok}
    return "; ".join(f"{v} x {k}" for k, v in bad.items()) or "none"


_CLUSTER_ROWS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    (
        "Clusters running / created (201)",
        lambda r: (
            f"{_get(r, 'create', 'running')} / "
            f"{(_get(r, 'create', 'request_statuses') or {}).get('201', 0)}"
        ),
    ),
    (
        "Create: POST answered, p50 / p95 / max",
        lambda r: _spread(_get(r, "create", "post_answered")),
    ),
    (
        "Create: POST to seen `running`, p50 / p95 / max",
        lambda r: _spread(_get(r, "create", "time_to_running")),
    ),
    (
        "Create: every cluster `running`, from the first POST",
        lambda r: _fmt(_get(r, "create", "all_running_seconds"), " s", 2),
    ),
    (
        "Create: the service's first / last `create daskclusters` call",
        lambda r: " / ".join(
            _fmt(t, " s", 2)
            for t in _get(_get(r, "kubernetes_calls", "create"), "timeline_seconds", CREATE_CALL)
            or [None, None]
        ),
    ),
    (
        "Create: every head pod running in the emulator",
        lambda r: _fmt(_get(r, "create", "all_heads_running_in_emulator_seconds"), " s", 2),
    ),
    (
        "Scale up: PATCH answered, p50 / p95 / max",
        lambda r: _spread(_get(r, "scale_up", "request")),
    ),
    (
        "Scale up: every worker pod made / running",
        lambda r: (
            f"{_fmt(_get(r, 'scale_up', 'pods_made_seconds'), ' s', 2)} / "
            f"{_fmt(_get(r, 'scale_up', 'pods_at_count_seconds'), ' s', 2)}"
        ),
    ),
    (
        "Scale down: PATCH answered, p50 / p95 / max",
        lambda r: _spread(_get(r, "scale_down", "request")),
    ),
    (
        "Scale down: worker pods at the new count",
        lambda r: _fmt(_get(r, "scale_down", "pods_at_count_seconds"), " s", 2),
    ),
    ("Delete: DELETE answered, p50 / p95 / max", lambda r: _spread(_get(r, "delete", "request"))),
    (
        "Delete: every cluster gone from its user's list",
        lambda r: _fmt(_get(r, "delete", "all_unlisted_seconds"), " s", 2),
    ),
    (
        "Service worker CPU per cluster: create / up / down / delete",
        lambda r: (
            " / ".join(
                _fmt(_get(r, "cost", phase, "cpu_ms_per_cluster", "service_workers"), "", 1)
                for phase in CLUSTER_PHASES
            )
            + " ms"
        ),
    ),
    (
        "Anything that went wrong",
        lambda r: "; ".join(
            f"{label}: {_not_ok(r, phase, ok)}"
            for label, phase, ok in (
                ("create", "create", "running"),
                ("up", "scale_up", "scaled"),
                ("down", "scale_down", "scaled"),
                ("delete", "delete", "unlisted"),
            )
        ),
    ),
]
"""Rows of the clusters table: label, and the cell of one variant's result."""


def _clusters(b: dict[str, Any]) -> list[str]:
    """The cluster benchmarks, with an instant and a realistic API side by side, and the
    Kubernetes calls each operation made."""
    variants = {name: b[name] for name in CLUSTER_VARIANTS if b.get(name)}
    if not variants:
        return []
    lines = ["## Compute clusters", ""]
    failed = {name: r for name, r in variants.items() if "error" in r}
    for name, result in failed.items():
        lines += [f"`{name}` failed to run: `{result['error']}`", ""]
    shown = {name: r for name, r in variants.items() if "error" not in r}
    if not shown:
        return lines
    first = next(iter(shown.values()))
    lines += [
        f"{first.get('users')} users, each with a running lab (spawned beforehand, not "
        f"measured), create one Dask cluster each at the same moment (1 worker, at most "
        f"{first.get('max_workers')}), scale every one to {first.get('max_workers')} at once, "
        "then to 1 at once, then delete them all at once; a gevent client in its own process "
        f"sends each user's requests with the user's own token, to gunicorn with "
        f"{_workers(first)}, on {first.get('nodes')} nodes (room for every lab and every "
        "cluster at its largest). Each user's budget allows exactly one such cluster "
        f"({_budget(first.get('budget') or {})}). The service has no event stream for "
        "clusters: the client "
        f"reads a cluster every {first.get('poll_seconds')} s until it runs (or until it is "
        "no longer listed), so those times are late by up to that. A scale is done when the "
        "emulator's store holds the new count of worker pods of every cluster, all running "
        "(a listener on the store notes each change as it is committed); times run from the "
        "moment every request is released.",
        "",
    ]
    heads = ["", *(_variant_heading(name, r) for name, r in shown.items())]
    lines += ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for label, cell in _CLUSTER_ROWS:
        lines.append("| " + " | ".join([label, *(cell(r) for r in shown.values())]) + " |")
    lines += ["", *_cluster_calls(shown)]
    for name, result in shown.items():
        log = _log(result)
        if log:
            lines += [f"`{name}`: " + log[0], *log[1:]]
    return lines


KERNEL_VARIANTS = {"kernels": "Instant API", "kernels_5ms": "API at {latency} a call"}
_KERNEL_ROWS: list[tuple[str, str, str]] = [
    ("`start_kernel` returned", "start_kernel", "remote"),
    ("first execute reply", "first_reply", "remote"),
    ("`shutdown_kernel` returned", "shutdown", "remote"),
    ("the service no longer lists it", "unlisted_after_shutdown", "remote"),
    ("`start_kernel` returned", "start_kernel", "local"),
    ("first execute reply", "first_reply", "local"),
    ("`shutdown_kernel` returned", "shutdown", "local"),
]
"""Rows of the kernels table: step, key in the result, which kernel."""


def _kernels(b: dict[str, Any]) -> list[str]:
    """Remote kernels against local ones, with an instant and a realistic API side by side."""
    variants = {name: b[name] for name in KERNEL_VARIANTS if b.get(name)}
    if not variants:
        return []
    lines = ["## Remote kernels", ""]
    for name, result in variants.items():
        if "error" in result:
            lines += [f"`{name}` failed to run: `{result['error']}`", ""]
    shown = {name: r for name, r in variants.items() if "error" not in r}
    if not shown:
        return lines
    first = next(iter(shown.values()))
    lines += [
        f"One user with a running lab; a client in its own process, with the lab's "
        f"environment, starts a kernel with a `KernelManager`, executes `2 + 2`, reads the "
        f"reply and shuts the kernel down, {first.get('rounds')} times with the remote "
        f"kernelspec (the `lab-spawner` provisioner: a `{first.get('size')}` pod through the "
        "service, a real ipykernel in the process runtime) and as many with the local "
        "`python3` one (a process jupyter_client starts itself), alternating. Times (p50, and "
        "min to max) run from the call to `start_kernel`, except the shutdown's, from the "
        "reply, and the last remote row's, from the shutdown's return.",
        "",
    ]
    heads = ["Kernel", "Step"]
    for name, result in shown.items():
        heading = KERNEL_VARIANTS[name].format(latency=_fmt(result.get("api_latency_ms"), " ms", 0))
        if result.get("carried_from"):
            heading += f" (run of {result['carried_from']})"
        heads.append(heading)
    lines += ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for label, key, side in _KERNEL_ROWS:
        cells = [side, label]
        for result in shown.values():
            summary = _get(result, side, key) or {}
            cells.append(
                f"{_fmt(summary.get('p50_ms'), ' ms')} ({_fmt(summary.get('min_ms'), '')} to "
                f"{_fmt(summary.get('max_ms'), ' ms')})"
            )
        lines.append("| " + " | ".join(cells) + " |")
    ratio = ["", "first reply, remote / local (p50)"]
    for result in shown.values():
        ratio.append(
            f"{_fmt(result.get('first_reply_ratio_p50'), '', 2)} x "
            f"(+{_fmt(result.get('first_reply_remote_minus_local_p50_ms'), ' ms')})"
        )
    lines += ["| " + " | ".join(ratio) + " |", ""]
    for name, result in shown.items():
        log = _log(result)
        if log:
            lines += [f"`{name}`: " + log[0], *log[1:]]
    return lines


def _replicas(b: dict[str, Any]) -> list[str]:
    """Storms and status reads through the balancer by replica count, and leader failover."""
    result = b.get("replicas")
    if not result:
        return []
    if "error" in result:
        return ["## Replicas", "", f"Failed to run: `{result['error']}`", ""]
    lines = [
        "## Replicas",
        "",
        f"Replicas of one gunicorn worker each behind the local stack's HAProxy (in front of "
        f"one replica too); medians of {result.get('runs')} fresh stacks each. A storm of "
        f"{result.get('users')} users spawning at once (the storm client, every request and "
        "event stream through the balancer), then status reads of their labs. All replicas "
        "share this machine's cores, so more replicas add no capacity here.",
        "",
        "| Replicas | Storm, wall to the last `complete` | Completed | Status reads/s | "
        "Status p99 |",
        "|---|---|---|---|---|",
    ]
    for count, row in (result.get("by_replicas") or {}).items():
        p99 = ", ".join(_fmt(v, " ms") for v in row.get("status_p99_ms") or [])
        lines.append(
            f"| {count} | {_fmt(row.get('storm_seconds_median'), ' s', 2)} | "
            f"{row.get('storm_completed')} | "
            f"{_fmt(row.get('status_requests_per_second_median'), '', 0)} | {p99} |"
        )
    failover = result.get("leader_failover_seconds") or {}
    lines += [
        "",
        f"Leader failover (three replicas, leases of {_fmt(result.get('lease_seconds'), ' s', 0)}"
        f"): the replica leading the lab watcher killed with SIGKILL, its loops led by another "
        f"replica after {_fmt(failover.get('median'), ' s', 2)} (median; max "
        f"{_fmt(failover.get('max'), ' s', 2)}; runs {failover.get('runs')}; expected within "
        f"{_fmt(failover.get('bound'), ' s', 2)}).",
        "",
    ]
    return lines


def _budget(budget: dict[str, Any]) -> str:
    return (
        f"{budget.get('clusters')} cluster, {budget.get('workers')} workers, "
        f"{_fmt(budget.get('cpu'), ' CPU', 0)}, {budget.get('memory')}"
    )


def _variant_heading(name: str, result: dict[str, Any]) -> str:
    latency = _fmt(result.get("api_latency_ms"), " ms", 0)
    heading = CLUSTER_VARIANTS[name].format(latency=latency)
    if result.get("carried_from"):
        heading += f" (run of {result['carried_from']})"
    return heading


def _cluster_calls(shown: dict[str, dict[str, Any]]) -> list[str]:
    """Kubernetes calls per operation, each cell one variant's figure (``a / b`` for two)."""
    calls = {name: r.get("kubernetes_calls") or {} for name, r in shown.items()}
    names = sorted(
        {
            call
            for per_phase in calls.values()
            for phase in per_phase.values()
            for call in (phase.get("per_cluster") or {})
        }
    )
    if not names:
        return []
    columns = " / ".join(_variant_heading(name, r) for name, r in shown.items())
    lines = [
        "**Kubernetes calls per operation** (per cluster: the service's calls in the users' "
        f"namespaces during each phase and a second after it, over the clusters it acted on; "
        f"{columns}). The audit log records HTTP requests only: the simulated operators, "
        "scheduler and kubelet write to the emulator's store directly, and the user agents "
        "below show who made the requests.",
        "",
        "| Call | " + " | ".join(CLUSTER_PHASES.values()) + " |",
        "|---|" + "---|" * len(CLUSTER_PHASES),
    ]

    def cell(phase: str, key: str | None) -> str:
        values = []
        for per_phase in calls.values():
            data = per_phase.get(phase) or {}
            value = data.get("total_per_cluster") if key is None else None
            if key is not None:
                value = (data.get("per_cluster") or {}).get(key, 0)
            values.append(_fmt(value, "", 2) if value is not None else "n/a")
        return " / ".join(values) if any(v not in ("0", "0.00") for v in values) else ""

    for call in names:
        lines.append(
            f"| {call} | " + " | ".join(cell(phase, call) for phase in CLUSTER_PHASES) + " |"
        )
    lines.append(
        "| **all** | " + " | ".join(f"**{cell(phase, None)}**" for phase in CLUSTER_PHASES) + " |"
    )
    lines.append("")
    for name, per_phase in calls.items():
        spread = _get(per_phase, "create", "spread_per_cluster") or {}
        elsewhere = {
            CLUSTER_PHASES[phase]: data.get("elsewhere")
            for phase, data in per_phase.items()
            if data.get("elsewhere")
        }
        agents = sorted(
            {agent for data in per_phase.values() for agent in (data.get("user_agents") or {})}
        )
        errors = {p: d.get("errors") for p, d in per_phase.items() if d.get("errors")}
        redis = {
            CLUSTER_PHASES[phase]: _get(shown[name], "cost", phase, "redis_commands_per_cluster")
            or {}
            for phase in CLUSTER_PHASES
        }
        lines.append(
            f"- `{name}`: one create made {spread.get('min')} to {spread.get('max')} calls "
            f"(median {_fmt(spread.get('median'), '', 1)}); user agents seen: "
            f"{', '.join(f'`{a}`' for a in agents) or 'none'}; calls answered with an error: "
            f"{errors or 'none'}; the service's calls elsewhere in the same windows (its "
            f"watches, reconciles and prepuller, not any one cluster's): "
            + (
                "; ".join(
                    f"{phase}: " + ", ".join(f"{k} {v}" for k, v in counts.items())
                    for phase, counts in elsewhere.items()
                )
                or "none"
            )
            + "; Redis commands per cluster: "
            + "; ".join(
                f"{phase}: " + ", ".join(f"{k} {v}" for k, v in list(counts.items())[:6])
                for phase, counts in redis.items()
                if counts
            )
            + "."
        )
    return [*lines, ""]


def _memory_rows(b: dict[str, Any]) -> str:
    parts = []
    lat = b.get("latency") or {}
    if lat.get("worker_rss_kib_at_rest"):
        parts.append(f"at rest after warm-up {_mib(lat['worker_rss_kib_at_rest'])}")
    st = b.get("storm") or {}
    rss = st.get("worker_rss_kib") or {}
    if rss.get("peak_during_spawn_storm"):
        parts.append(f"storm peak {_mib(rss['peak_during_spawn_storm'])}")
    ev = b.get("streams") or {}
    if _get(ev, "worker_rss_kib", "with_streams_open"):
        parts.append(
            f"one worker with {ev.get('held_open')} streams "
            f"{_mib(_get(ev, 'worker_rss_kib', 'with_streams_open'))}"
        )
    return "; ".join(parts)


def _log(result: dict[str, Any]) -> list[str]:
    log = result.get("service_log") or {}
    if not log:
        return []
    lines = [
        f"Service log during this benchmark: {log.get('warnings', 0)} warnings, "
        f"{log.get('errors', 0)} errors, {log.get('tracebacks', 0)} tracebacks.",
    ]
    samples = log.get("samples") or []
    if samples:
        lines += ["", "```", *samples[:5], "```"]
    return [*lines, ""]


def _latency(r: dict[str, Any]) -> list[str]:
    lines = [
        "## 1. Spawn latency with an instant kubelet",
        "",
        f"{r.get('spawns')} sequential spawns of one user (each deleted before the next) through",
        f"gunicorn with {_workers(r)}; pull time 0, every image already on every node, after a",
        "warm-up spawn on each node. Latency runs from sending the POST to parsing the",
        "`complete` event, timed by a client in a process of its own (`bench.latency_client`):",
        "sharing the emulators' interpreter, it waited for their GIL at every wake-up. It",
        "speaks HTTP/1.1 itself on one kept-alive connection, each request in one write, as",
        "the status benchmark leaves its load to wrk: `requests` spent 0.8 ms preparing a",
        "POST before its first byte.",
        "",
        "| | p50 | p95 | min | max |",
        "|---|---|---|---|---|",
    ]
    for label, key in (
        ("Spawn (POST to complete)", "latency"),
        ("Delete (DELETE to complete)", "delete_latency"),
    ):
        s = r.get(key) or {}
        lines.append(
            f"| {label} | {_fmt(s.get('p50_ms'), ' ms')} | {_fmt(s.get('p95_ms'), ' ms')} | "
            f"{_fmt(s.get('min_ms'), ' ms')} | {_fmt(s.get('max_ms'), ' ms')} |"
        )
    floor = r.get("floor") or {}
    calls = r.get("calls_per_spawn") or {}
    lines += [
        "",
        "A delete ends when the lab's namespace is gone, and the emulator keeps a deleted",
        f"namespace terminating for {_fmt(r.get('namespace_termination_ms'), ' ms')} (a real "
        "cluster takes seconds emptying one), then empties and removes it: measured from its",
        "answer to the DELETE to the removal, p50 "
        f"{_fmt(_get(r, 'namespace_terminating_measured', 'p50_ms'), ' ms')}. Each delete less its",
        "own namespace's terminating time is the service's share: p50 "
        f"{_fmt(_get(r, 'delete_service_share', 'p50_ms'), ' ms')}, p95 "
        f"{_fmt(_get(r, 'delete_service_share', 'p95_ms'), ' ms')}.",
        "",
        f"Failures: {r.get('failures') or 'none'}. Kubernetes calls per spawn: median "
        f"{calls.get('median')} (min {calls.get('min')}, max {calls.get('max')}; spawns by "
        f"number of calls: {calls.get('spawns_by_count')}); "
        f"{r.get('distinct_call_sequences')} distinct call sequence(s).",
        "",
        "**Floor.** The calls of a reference spawn (a usual one: its pod ready at the first",
        "look, as the instant kubelet almost always has it), replayed one after another with",
        "the real `kubernetes` client into a fresh namespace after each timed spawn (from the",
        "timing client's process: a client in the emulators' own process waited for their",
        "GIL, six creates in a row taking 4.9 ms there against 4.3 ms), so spawns",
        f"and floor sample the machine alike ({floor.get('replays')} replays), take "
        f"p50 {_fmt(_get(floor, 'api_ms', 'p50_ms'), ' ms')} "
        f"(min {_fmt(_get(floor, 'api_ms', 'min_ms'), ' ms')}); waits in watches "
        f"{_fmt(floor.get('watch_ms_median'), ' ms')}. p50 spawn = "
        f"**{_fmt(r.get('ratio_p50_to_floor'), '', 2)} x floor** (goal 1.5).",
        "",
        "| Call | Emulator time (median) |",
        "|---|---|",
    ]
    for entry in floor.get("per_call") or []:
        lines.append(f"| {entry['call']} | {entry['median_ms']} ms |")
    phases = r.get("phases") or {}
    lines += [
        "",
        "**Where a spawn's time goes** (p50 of each phase, from the audit log's timestamps):",
        "",
        "| Phase | p50 | p95 |",
        "|---|---|---|",
    ]
    names = {
        "post_answered": "POST answered (303)",
        "until_first_kubernetes_call": "POST sent to first Kubernetes call",
        "kubernetes_span": "first to last Kubernetes call",
        "after_last_kubernetes_call": "last Kubernetes call to `complete` parsed",
    }
    for key, label in names.items():
        s = phases.get(key) or {}
        lines.append(
            f"| {label} | {_fmt(s.get('p50_ms'), ' ms')} | {_fmt(s.get('p95_ms'), ' ms')} |"
        )
    lines += ["", *_log(r)]
    return lines


def _storm(r: dict[str, Any]) -> list[str]:
    spawn = r.get("spawn") or {}
    delete = r.get("delete") or {}
    integ = r.get("integrity_after_spawn") or {}
    after = r.get("after_delete") or {}
    cpu = r.get("spawn_cpu_seconds") or {}
    users = max(1, int(r.get("users") or 1))
    lines = [
        f"## 2. Spawn storm: {r.get('users')} users at once",
        "",
        f"{r.get('users')} distinct users (each with UID, GID and groups in the Gafaelfawr",
        "emulator and their own token) POST their spawn at the same moment to gunicorn with 2",
        f"workers and follow their event streams (a gevent client in its own process), on "
        f"{r.get('nodes')} nodes with every image cached and an instant kubelet.",
        "",
        "| | Spawn storm | Delete storm |",
        "|---|---|---|",
        f"| All done after | {_fmt(spawn.get('total_seconds'), ' s', 2)} | "
        f"{_fmt(delete.get('total_seconds'), ' s', 2)} |",
        f"| Completed / failed | {spawn.get('completed')} / {spawn.get('failed')} | "
        f"{delete.get('completed')} / {delete.get('failed')} |",
        f"| Per user, p50 / p95 | {_fmt(_get(spawn, 'per_user', 'p50_ms'), ' ms', 0)} / "
        f"{_fmt(_get(spawn, 'per_user', 'p95_ms'), ' ms', 0)} | "
        f"{_fmt(_get(delete, 'per_user', 'p50_ms'), ' ms', 0)} / "
        f"{_fmt(_get(delete, 'per_user', 'p95_ms'), ' ms', 0)} |",
        f"| Request answered (303 / 202), p50 / p95 | "
        f"{_fmt(_get(spawn, 'request_answered', 'p50_ms'), ' ms', 0)} / "
        f"{_fmt(_get(spawn, 'request_answered', 'p95_ms'), ' ms', 0)} | "
        f"{_fmt(_get(delete, 'request_answered', 'p50_ms'), ' ms', 0)} / "
        f"{_fmt(_get(delete, 'request_answered', 'p95_ms'), ' ms', 0)} |",
        f"| Load client CPU | {_fmt(spawn.get('client_cpu_seconds'), ' s', 2)} | "
        f"{_fmt(delete.get('client_cpu_seconds'), ' s', 2)} |",
        "",
    ]
    outcomes = {k: v for k, v in (spawn.get("outcomes") or {}).items() if k != "complete"}
    if outcomes:
        lines += ["Failure reasons (from the `failed` events):", ""]
        lines += [f"- {count} x {reason}" for reason, count in outcomes.items()]
        lines.append("")
    lines += [
        f"**Integrity after the spawn storm:** {integ.get('lab_records')} lab records "
        f"({integ.get('record_statuses')}), {integ.get('namespaces')} lab namespaces, "
        f"{integ.get('pods')} lab pods; users with more than one pod: "
        f"{integ.get('users_with_duplicate_pods')}; users without a pod: "
        f"{integ.get('users_without_pod')}; namespaces without a lab record: "
        f"{integ.get('orphan_namespace_count')}; pods without a record: "
        f"{integ.get('orphan_pods')}; operations still pending: {integ.get('pending_operations')}.",
        "",
        f"**After deleting everything:** clean = {after.get('clean')} (namespaces "
        f"{after.get('namespaces')}, pods {after.get('pods')}, lab records "
        f"{after.get('lab_records')}, pending operations {after.get('pending_operations')}).",
        "",
        "**What limited it: CPU.** CPU seconds used during the spawn storm:",
        "",
        "| Part | CPU s | per spawn |",
        "|---|---|---|",
    ]
    for part, seconds in cpu.items():
        lines.append(f"| {part.replace('_', ' ')} | {seconds} | {seconds * 1000 / users:.1f} ms |")
    client = spawn.get("client_cpu_seconds")
    if client is not None:
        lines.append(f"| load client | {client} | {client * 1000 / users:.1f} ms |")
    total_cpu = sum(cpu.values()) + (client or 0)
    wall = spawn.get("total_seconds") or 0
    cores = r.get("_cores") or 2
    if wall:
        lines += [
            "",
            f"Together {total_cpu:.1f} CPU s in {wall} s of wall time: "
            f"{100 * total_cpu / (wall * cores):.0f}% of {cores} cores.",
        ]
    commands = r.get("redis_commands_per_spawn") or {}
    calls = r.get("kubernetes_calls_by_kind") or {}
    lines += [
        "",
        "Redis commands per spawn: "
        + ", ".join(f"{k} {v}" for k, v in list(commands.items())[:12]),
        "",
        f"Kubernetes calls during the storm: {r.get('kubernetes_calls')} "
        f"({(r.get('kubernetes_calls') or 0) / users:.1f} per spawn): "
        + ", ".join(f"{k} {v}" for k, v in calls.items()),
        "",
        *_log(r),
    ]
    return lines


def _status(r: dict[str, Any]) -> list[str]:
    lines = [
        f"## 3. Status throughput with {r.get('records')} lab records",
        "",
        f"Records written by {r.get('records_written_by')}. `GET /spawner/v1/labs/<user>` with",
        f"the admin token, cycling over all users, {r.get('connections')} keep-alive connections,",
        f"{r.get('seconds_per_target')} s per target, {r.get('repeats')} interleaved repeats",
        f"(bare, healthz, status, ...), load by {r.get('tool')}. The bare route is a one-route",
        "Flask app (`bench/bare_app.py`) under the same `gunicorn.conf.py` and worker count, in",
        "the same run. `/healthz` of the service (no auth, no Redis) shows the cost of the",
        "service's app before any of its own work. The table shows each target's median repeat.",
        "",
        "| Target | requests/s | p50 | p90 | p99 | non-2xx |",
        "|---|---|---|---|---|---|",
    ]
    for label, key in (
        ("bare route", "bare_route"),
        ("bare route, one worker", "bare_route_one_worker"),
        ("service /healthz", "service_healthz"),
        ("lab status", "status_route"),
    ):
        s = r.get(key) or {}
        lat = s.get("latency_ms") or {}
        lines.append(
            f"| {label} | {_fmt(s.get('requests_per_second'), '', 0)} | "
            f"{_fmt(lat.get('p50'), ' ms', 2)} | {_fmt(lat.get('p90'), ' ms', 2)} | "
            f"{_fmt(lat.get('p99'), ' ms', 2)} | {s.get('non_2xx', s.get('statuses'))} |"
        )
    commands = r.get("redis_commands_per_status_request") or {}
    waits = r.get("run_queue_ms_per_second") or {}
    lines += [
        "",
        "**Waiting for a core.** Each worker of a load run was ready to run but waited"
        " for a core, per second of load (median of the repeats, from"
        " `/proc/<pid>/task/*/schedstat`): "
        + ", ".join(f"{name} {_fmt(value, ' ms', 1)}" for name, value in waits.items())
        + ". Two workers, the load client and Redis share two cores; one worker leaves a"
        " core to the client.",
        f"Status / bare = **{_fmt(r.get('ratio_status_to_bare'), '', 2)}** (goal at least 0.5;"
        f" median of the repeats {r.get('ratio_per_repeat')}). Requests/s per repeat: "
        + "; ".join(
            f"{name} {values}"
            for name, values in (r.get("requests_per_second_per_repeat") or {}).items()
        )
        + ".",
        "",
        "**The token check is part of the cost:** every request verifies its token through the",
        "Gafaelfawr cache in Redis. Redis commands per status request: "
        + ", ".join(f"{k} {v}" for k, v in commands.items() if v >= 0.01)
        + " (the token-info cache GET and the record GET). Gafaelfawr calls during the status"
        f" runs, all for the one admin token: {r.get('gafaelfawr_calls_during_status_run')}"
        " (its answer is cached for `gafaelfawr.cacheSeconds`; every request that misses the"
        " cache at the same moment asks Gafaelfawr itself).",
        "",
        f"Worker RSS after the run: service {_mib(r.get('worker_rss_kib_after_status_run'))}, "
        f"bare route {_mib(r.get('bare_worker_rss_kib'))}.",
        "",
        *_log(r),
    ]
    return lines


def _streams(r: dict[str, Any]) -> list[str]:
    opened = r.get("open") or {}
    lines = [
        f"## 4. Event streams: {r.get('streams_requested')} in one worker",
        "",
        "One gunicorn gevent worker with `worker_connections` "
        f"{r.get('worker_connections')}. Users with an operation in progress are made in Redis",
        "through `LabStore` and `EventStore`; an epoll client in its own process opens one",
        "stream per user (admin token), then each round appends one event to every user's",
        "stream in one Redis pipeline and the client timestamps its arrival on each stream,",
        "from the moment the pipeline, packed beforehand, is sent (the collector of the",
        "benchmark's own process paused meanwhile: a full collection of its emulators'",
        "objects stalled one round in ten by about 200 ms inside the timed send).",
        "",
        f"- Streams held open: **{r.get('held_open')}** of {r.get('streams_requested')} "
        f"(opened in {opened.get('open_seconds')} s); errors at open: "
        f"{opened.get('errors') or 'none'}",
        f"- Delivery of one event to every open stream ({r.get('deliveries')} deliveries over "
        f"{r.get('rounds')} rounds, {r.get('deliveries_expected')} expected): p50 "
        f"**{_fmt(_get(r, 'delivery_latency', 'p50_ms'), ' ms')}**, p99 "
        f"**{_fmt(_get(r, 'delivery_latency', 'p99_ms'), ' ms')}**, max "
        f"{_fmt(_get(r, 'delivery_latency', 'max_ms'), ' ms')}",
        f"- Gafaelfawr calls while the streams opened (one admin token): "
        f"{r.get('gafaelfawr_calls_at_open')}",
        f"- Worker RSS: {_mib(_get(r, 'worker_rss_kib', 'before_streams'))} before, "
        f"{_mib(_get(r, 'worker_rss_kib', 'with_streams_open'))} with the streams open "
        f"({r.get('rss_per_stream_kib')} KiB per stream)",
        f"- Worker CPU while the streams are idle: {r.get('worker_cpu_idle_with_streams')} cores",
        f"- Worker CPU per round (one event to every stream), less the idle streams' share: "
        f"{_fmt(r.get('worker_cpu_ms_per_round'), ' ms')}",
        f"- `/healthz` while the streams are open: p50 "
        f"{_fmt(_get(r, 'healthz_while_streams_open', 'p50_ms'), ' ms')}, p99 "
        f"{_fmt(_get(r, 'healthz_while_streams_open', 'p99_ms'), ' ms')}",
        f"- A terminal event closed every stream after {r.get('seconds_until_all_closed')} s; "
        f"ended with the terminal event: {r.get('ended_with_terminal_event')}; client-side "
        f"errors over the run: {r.get('client_errors') or 'none'}",
        "",
        "| Round | delivered | pipeline | p50 | p99 | last |",
        "|---|---|---|---|---|---|",
    ]
    for row in r.get("per_round") or []:
        lines.append(
            f"| {row['round']} | {row['delivered']} | {row['pipeline_ms']} ms | "
            f"{_fmt(row['p50_ms'], ' ms')} | {_fmt(row['p99_ms'], ' ms')} | "
            f"{_fmt(row['last_ms'], ' ms')} |"
        )
    lines += ["", *_log(r)]
    return lines


def _prepull(r: dict[str, Any]) -> list[str]:
    first, fill, steady = r.get("first_pass") or {}, r.get("fill") or {}, r.get("steady_pass") or {}
    return [
        "## Prepuller",
        "",
        f"{r.get('nodes')} emulated nodes, {r.get('images')} prepull images, each pull taking "
        f"{r.get('pull_seconds')} s, one pull at a time per node (`pullsPerNode: 1`). The "
        "prepuller's pass runs in process against the emulator over HTTP and a private Redis.",
        "",
        "| Measure | Value |",
        "|---|---|",
        f"| First pass on an empty cluster | {_fmt(first.get('seconds'), ' s', 3)}, "
        f"{first.get('kubernetes_calls')} Kubernetes calls, {first.get('pulls_started')} pulls "
        "started |",
        f"| Until every node has every image | {_fmt(fill.get('seconds'), ' s', 2)} over "
        f"{fill.get('passes')} passes; floor (images x pull time) "
        f"{_fmt(fill.get('floor_seconds'), ' s', 2)}; ratio "
        f"{_fmt(fill.get('ratio_to_floor'), '', 2)}; last pull pod deleted at "
        f"{_fmt(fill.get('pods_cleaned_up_seconds'), ' s', 2)} |",
        f"| Decision pass, all cached | p50 {_fmt(steady.get('p50_ms'), ' ms')}, max "
        f"{_fmt(steady.get('max_ms'), ' ms')}, {steady.get('kubernetes_calls')} Kubernetes calls |",
        "",
    ]


SCALE_VARIANTS = {"scale": "Instant API", "scale_5ms": "API at {latency} a call"}
_SCALE_UNITS: dict[str, tuple[str, float, int]] = {
    "rebuild (in process)": (" s", 1.0, 2),
    "rebuild CPU": (" s", 1.0, 2),
    "reconcile pass": (" s", 1.0, 2),
    "reconcile CPU": (" s", 1.0, 2),
    "reconcile Kubernetes calls": ("", 1.0, 0),
    "prepuller decision pass": (" ms", 1000.0, 1),
    "watcher start": (" s", 1.0, 2),
    "watcher CPU per 1,000 pod changes": (" s", 1.0, 2),
    "watcher idle CPU per minute": (" s", 1.0, 2),
    "Redis bytes per lab": (" B", 1.0, 0),
    "Redis used memory": (" MiB", 1 / 1048576, 1),
    "status requests/s": ("/s", 1.0, 0),
    "rebuild through gunicorn": (" s", 1.0, 2),
    "emulator RSS": (" MiB", 1 / 1024, 0),
}
"""How each scale measure is shown: unit, scale factor and digits."""


def _scale(b: dict[str, Any]) -> list[str]:
    """Each measure at every population size, with its growth exponent and verdict."""
    variants = {name: b[name] for name in SCALE_VARIANTS if b.get(name)}
    if not variants:
        return []
    lines = [
        "## Scale: 1,000 to 10,000 labs, simulated",
        "",
        "For each size an emulator in its own process holds that many users' running labs on "
        "500 nodes, built by the service's own builders (`devstack.kube.population`): "
        "namespaces, ConfigMaps, Secrets, NetworkPolicy, ResourceQuota, Service, a `Running` "
        "pod and its Events each, nothing running. The rebuild (Redis emptied, one reconcile "
        "pass), the steady reconcile, the prepuller's decision pass and the watcher run in "
        "the benchmark's process (their own time and CPU); status reads and a rebuild after "
        "Redis is emptied under the running service go through gunicorn. Exponent: "
        "log(largest / smallest) / log(size ratio); 1 is linear.",
        "",
    ]
    for name, result in variants.items():
        heading = SCALE_VARIANTS[name].format(latency=_fmt(result.get("api_latency_ms"), " ms", 0))
        if result.get("carried_from"):
            heading += f" (run of {result['carried_from']})"
        lines += [f"### {heading}", ""]
        if "error" in result:
            lines += [f"Failed to run: `{result['error']}`", ""]
            continue
        sizes = [str(s) for s in result.get("sizes") or []]
        growth = result.get("growth") or {}
        lines += [
            "| Measure | " + " | ".join(f"{int(s):,} labs" for s in sizes) + " | Exponent | |",
            "|---|" + "---|" * (len(sizes) + 2),
        ]
        for label, row in growth.items():
            unit, factor, digits = _SCALE_UNITS.get(label, ("", 1.0, 2))
            cells = []
            for size in sizes:
                value = (row.get("values") or {}).get(size)
                cells.append(_fmt(None if value is None else value * factor, unit, digits))
            lines.append(
                f"| {label} | " + " | ".join(cells) + f" | {_fmt(row.get('exponent'), '', 2)} "
                f"| {row.get('verdict')} |"
            )
        goal = result.get("rebuild_goal") or {}
        listing = result.get("passes_listing_per_user") or []
        lines += [
            "",
            f"Rebuild of {_fmt(goal.get('labs'))} labs: {_fmt(goal.get('seconds'), ' s', 2)} in "
            f"process, {_fmt(goal.get('through_gunicorn_seconds'), ' s', 2)} through gunicorn "
            f"(goal under {_fmt(goal.get('goal_seconds'), ' s', 0)}: "
            f"{'met' if goal.get('met') else 'not met'}). Passes whose Kubernetes calls grow "
            f"with the labs: {'; '.join(listing) or 'none'}.",
            "",
        ]
        for size in result.get("results") or []:
            if "error" in size:
                lines.append(f"- {size.get('labs')} labs: failed: `{size['error']}`")
                continue
            status = size.get("status") or {}
            latency = status.get("latency_ms") or {}
            population = size.get("population") or {}
            lines.append(
                f"- {size.get('labs'):,} labs: populated in "
                f"{_fmt(population.get('seconds'), ' s', 1)} "
                f"({sum((population.get('objects') or {}).values()):,} objects); status p50 "
                f"{_fmt(latency.get('p50'), ' ms')}, p99 {_fmt(latency.get('p99'), ' ms')} "
                f"({_fmt(status.get('ratio_to_healthz'), '', 2)} of `/healthz`); reconcile "
                f"{_fmt(_get(size, 'reconcile', 'kubernetes_calls'))} calls; watcher start "
                f"{_fmt(_get(size, 'watcher', 'start_seconds'), ' s', 2)}, first reconcile "
                f"done {_fmt(_get(size, 'watcher', 'start_to_first_reconcile_seconds'), ' s', 2)}"
                " after leadership"
            )
        lines.append("")
    return lines


_FAILOVER_ROWS = (
    ("New primary named by the sentinels", "new_primary_named_seconds", " s"),
    ("First spawn accepted through it", "first_spawn_accepted_seconds", " s"),
    ("Requests answered 503 until then", "unavailable_503", ""),
    ("Longest request", "longest_request_ms", " ms"),
)


def _redis_failover(b: dict[str, Any]) -> list[str]:
    """Redis behind Sentinel losing its primary: how long spawns are refused, and how."""
    result = b.get("redis_failover")
    if not result:
        return []
    lines = ["## Redis failover", ""]
    if "error" in result:
        return [*lines, f"Failed to run: `{result['error']}`", ""]
    if result.get("carried_from"):
        lines += [f"(Not run this time: figures of the run of {result['carried_from']}.)", ""]
    lines += [
        f"The service ({_workers(result)}) reaches Redis through "
        f"{result.get('sentinels')} sentinels (primary down after "
        f"{result.get('down_after_ms')} ms of silence) watching a primary and "
        f"{result.get('replicas')} replica, every server refusing writes with fewer than "
        f"{result.get('min_replicas_to_write')} replica following it. A client spawns labs "
        "one after another, trying a 503 again after 20 ms. Killed: the primary gets SIGKILL "
        "and is started again as the new primary's replica once the sentinels name one (as "
        "Kubernetes restarts a pod); measured from the kill. On command: `SENTINEL FAILOVER`, "
        "measured from the command. Medians of the runs, and each run (min to max).",
        "",
        "| Figure | Primary killed | `SENTINEL FAILOVER` |",
        "|---|---|---|",
    ]
    for label, key, unit in _FAILOVER_ROWS:
        cells = [label]
        for how in ("kill", "failover"):
            values = [r[key] for r in _get(result, how, "runs") or []]
            if not values:
                cells.append("not measured")
                continue
            ordered = sorted(values)
            middle = ordered[len(ordered) // 2]
            digits = 0 if key == "unavailable_503" else 2
            cells.append(
                f"{_fmt(middle, unit, digits)} ({_fmt(ordered[0], '', digits)} to "
                f"{_fmt(ordered[-1], unit, digits)}, {len(values)} runs)"
            )
        lines.append("| " + " | ".join(cells) + " |")
    others = sorted(
        {e for how in ("kill", "failover") for e in _get(result, how, "other_errors") or []}
    )
    lines += [
        "",
        f"Other errors: {', '.join(others) or 'none'}; requests left without an answer "
        f"(client timeout): {result.get('requests_hung', 0)}.",
        "",
    ]
    return lines


def _fileservers(b: dict[str, Any]) -> list[str]:
    """A user's file server: how long until it lists, and how fast a large file moves."""
    r = b.get("fileservers")
    if r is None:
        return []
    if "error" in r:
        return ["## Users' file servers", "", f"Failed to run: `{r['error']}`", ""]
    first = r.get("get_files_to_first_propfind") or {}
    lines = [
        "## Users' file servers",
        "",
        "On the stack `make run` starts: the file server is the repository's WebDAV server, a "
        "process behind the ingress proxy and the Gafaelfawr emulator. Each of "
        f"{r.get('rounds')} rounds starts it afresh with `GET /files` (which answers once it "
        "serves), lists the user's home with `PROPFIND`, then moves a "
        f"{r.get('size_mb')} MB file up (`PUT`) and down (`GET`) through the ingress with the "
        "token as the Basic password, and copies the same file with `cp` on the same disk.",
        "",
        "| Measure | p50 | p95 | max |",
        "|---|---|---|---|",
        f"| `GET /files` to the first successful `PROPFIND` | {_fmt(first.get('p50_ms'), ' ms')} "
        f"| {_fmt(first.get('p95_ms'), ' ms')} | {_fmt(first.get('max_ms'), ' ms')} |",
    ]
    for key, label in (("upload", "Upload"), ("download", "Download"), ("local_cp", "Local `cp`")):
        row = r.get(key) or {}
        lines.append(
            f"| {label} of {r.get('size_mb')} MB | {_fmt(row.get('p50_ms'), ' ms')} "
            f"| {_fmt(row.get('p95_ms'), ' ms')} | {_fmt(row.get('max_ms'), ' ms')} |"
        )
    lines += [
        "",
        f"Throughput at p50: upload {_fmt(r.get('upload_mb_per_s_p50'), ' MB/s')} "
        f"({_fmt(r.get('upload_vs_cp_p50'), '', 3)} of `cp`), download "
        f"{_fmt(r.get('download_mb_per_s_p50'), ' MB/s')} "
        f"({_fmt(r.get('download_vs_cp_p50'), '', 3)} of `cp`), `cp` "
        f"{_fmt(r.get('local_cp_mb_per_s_p50'), ' MB/s')}.",
        "",
    ]
    return lines


def markdown(results: dict[str, Any]) -> str:
    b = results["benchmarks"]
    lines = [
        "# Benchmark results",
        "",
        "Written by `python -m bench.run` (`make bench`); the raw figures of every run are in",
        "`bench/results/`. Benchmarks report numbers; they do not assert timings. Run a subset",
        "with `--only latency,storm,status,streams`; `--help` lists the sizes.",
        "",
        f"Command: `{results.get('command', 'python -m bench.run').strip()}` "
        f"({results.get('duration_seconds')} s).",
        "",
        *_goals(results),
        *_machine(results),
        *_overview(results),
        *_realistic(results),
        *_comparison(results),
    ]
    cores = results["machine"].get("cores") or 2
    sections = {
        "latency": _latency,
        "storm": _storm,
        "status": _status,
        "streams": _streams,
        "prepull": _prepull,
    }
    for name, render in sections.items():
        result = b.get(name)
        if result is None:
            continue
        if "error" in result:
            lines += [f"## {name}", "", f"Failed to run: `{result['error']}`", ""]
            continue
        rendered = render({**result, "_cores": cores})
        if result.get("carried_from"):
            rendered[1:1] = [
                "",
                f"(Not run this time: figures of the run of {result['carried_from']}.)",
            ]
        lines += rendered
    lines += _clusters(b)
    lines += _kernels(b)
    lines += _replicas(b)
    lines += _scale(b)
    lines += _redis_failover(b)
    lines += _fileservers(b)
    lines += [
        "## 5. Memory per worker",
        "",
        "RSS from `/proc/<pid>/status` of each gunicorn worker: "
        + (_memory_rows(b) or "not measured")
        + ".",
        "",
    ]
    return "\n".join(lines).rstrip() + "\n"

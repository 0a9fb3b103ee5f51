"""The clusters benchmark's load client, in its own process: ``python -m bench.clusters_client``.

Reads a job (JSON) on stdin and writes results (JSON) on stdout, as ``bench.storm_client``
does. Every user gets a greenlet; all are released at once. A ``create`` job POSTs a
cluster with the user's token and reads the cluster until it is ``running`` (or
``failed``); a ``scale`` job PATCHes the scaler's route with the user's token; a ``delete``
job DELETEs the cluster and reads the user's list of clusters until it is no longer in it.
The service has no event stream for clusters, so waiting is polling, every
``poll_seconds`` per cluster: the time a cluster is seen running is late by up to that.
Raw sockets under gevent keep the client far cheaper than the service it loads, and its
own process keeps it off the GIL of the emulators in the benchmark's main process.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event
from gevent import socket as gsocket

from bench.rawhttp import exchange

API = "/spawner/v1/labs"
SCALER = "/ddl_cluster_scaler/scale"


def _connect(address: tuple[str, int], timeout: float) -> Any:
    return gsocket.create_connection(address, timeout=timeout)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


class _Caller:
    """One user's requests to the service, each on a connection of its own (HTTP/1.0)."""

    def __init__(self, job: dict[str, Any], token: str) -> None:
        self.host, self.port = str(job["host"]), int(job["port"])
        self.timeout = float(job["timeout"])
        self.headers = {"Authorization": f"Bearer {token}"}
        self.reads = 0

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = dict(self.headers)
        data = b""
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        status, raw = exchange(
            _connect, method, self.host, self.port, path, headers, data, timeout=self.timeout
        )
        return status, _json(raw)

    def poll(self, path: str, done: Callable[[Any], str | None], every: float) -> str:
        """GET ``path`` until ``done`` names an outcome for its answer, or time runs out."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            status, answer = self.call("GET", path)
            self.reads += 1
            if status != 200:
                return f"read-http-{status}"
            outcome = done(answer)
            if outcome is not None:
                return outcome
            gevent.sleep(every)
        return "timed-out"


def _create(job: dict[str, Any], caller: _Caller, user: str, result: dict[str, Any]) -> None:
    body = {"kind": job["kind"], "workers": job["workers"], "max_workers": job["max_workers"]}
    started = time.monotonic()
    status, answer = caller.call("POST", f"{API}/{user}/clusters", body)
    result["request_status"] = status
    result["request_seconds"] = time.monotonic() - started
    if status != 201 or not isinstance(answer, dict):
        result["outcome"] = f"http-{status}: {str(answer)[:160]}"
        return
    name = str(answer["name"])
    result["name"] = name

    def running(cluster: Any) -> str | None:
        state = cluster.get("status") if isinstance(cluster, dict) else None
        if state == "running":
            return "running"
        if state == "failed":
            return f"failed: {str(cluster.get('error'))[:160]}"
        return None

    result["outcome"] = caller.poll(f"{API}/{user}/clusters/{name}", running, job["poll_seconds"])


def _scale(job: dict[str, Any], caller: _Caller, user: str, result: dict[str, Any]) -> None:
    name = result["name"]
    started = time.monotonic()
    status, answer = caller.call(
        "PATCH", f"{SCALER}/{job['kind']}/{name}", {"replicas": job["replicas"]}
    )
    result["request_status"] = status
    result["request_seconds"] = time.monotonic() - started
    effective = answer.get("effective_replicas") if isinstance(answer, dict) else None
    result["effective_replicas"] = effective
    if status != 200:
        result["outcome"] = f"http-{status}: {str(answer)[:160]}"
    elif effective != job["replicas"]:
        result["outcome"] = f"effective-{effective}"
    else:
        result["outcome"] = "scaled"


def _delete(job: dict[str, Any], caller: _Caller, user: str, result: dict[str, Any]) -> None:
    name = result["name"]
    started = time.monotonic()
    status, answer = caller.call("DELETE", f"{API}/{user}/clusters/{name}")
    result["request_status"] = status
    result["request_seconds"] = time.monotonic() - started
    if status != 202:
        result["outcome"] = f"http-{status}: {str(answer)[:160]}"
        return

    def unlisted(clusters: Any) -> str | None:
        names = [c.get("name") for c in clusters] if isinstance(clusters, list) else [name]
        return "unlisted" if name not in names else None

    result["outcome"] = caller.poll(f"{API}/{user}/clusters", unlisted, job["poll_seconds"])


MODES = {"create": _create, "scale": _scale, "delete": _delete}


def _one(job: dict[str, Any], entry: list[str], go: gevent.event.Event) -> dict[str, Any]:
    user, token, name = entry
    result: dict[str, Any] = {"user": user, "name": name or None}
    caller = _Caller(job, token)
    go.wait()
    started = time.monotonic()
    try:
        MODES[job["mode"]](job, caller, user, result)
    except OSError as exc:
        result["outcome"] = f"client-{type(exc).__name__}"
    result["done_seconds"] = time.monotonic() - started
    result["done_at"] = time.monotonic()
    result["reads"] = caller.reads
    return result


def main() -> None:
    job = json.load(sys.stdin)
    go = gevent.event.Event()
    greenlets = [gevent.spawn(_one, job, entry, go) for entry in job["users"]]
    gevent.sleep(0.2)  # every greenlet parked at the barrier
    started = time.monotonic()
    started_wall = time.time()
    go.set()
    gevent.joinall(greenlets)
    results = [
        g.value if g.successful() else {"outcome": f"client-{g.exception!r}"} for g in greenlets
    ]
    json.dump({"started_at": started, "started_wall": started_wall, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()

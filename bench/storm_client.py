"""The storm's load client, run as its own process: ``python -m bench.storm_client``.

Reads a job (JSON) on stdin and writes results (JSON) on stdout. Every user gets a
greenlet; all are released at once. A spawn job POSTs the spawn with the user's token and
follows the user's event stream to ``complete`` or ``failed``; a delete job DELETEs with the
admin token and follows the stream the same way. Raw sockets under gevent keep the client
far cheaper than the service it loads, and a separate process keeps it off the GIL of the
emulators running in the benchmark's main process.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import gevent
import gevent.event
from gevent import socket as gsocket

from bench.rawhttp import exchange
from bench.sse import SseParser

TERMINAL = ("complete", "failed")


def _connect(address: tuple[str, int], timeout: float) -> Any:
    return gsocket.create_connection(address, timeout=timeout)


def _one(job: dict[str, Any], user: str, token: str, go: gevent.event.Event) -> dict[str, Any]:
    host, port, timeout = job["host"], int(job["port"]), float(job["timeout"])
    api = "/spawner/v1/labs"
    result: dict[str, Any] = {"user": user}
    go.wait()
    started = time.monotonic()
    try:
        if job["mode"] == "spawn":
            body = json.dumps(
                {"options": {"image": job["image"], "size": "small"}, "env": {}}
            ).encode()
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            status, _ = exchange(
                _connect, "POST", host, port, f"{api}/{user}/spawn", headers, body, timeout=timeout
            )
            expected = 303
        else:
            headers = {"Authorization": f"Bearer {job['admin_token']}"}
            status, _ = exchange(
                _connect, "DELETE", host, port, f"{api}/{user}", headers, timeout=timeout
            )
            expected = 202
        result["request_status"] = status
        result["request_seconds"] = time.monotonic() - started
        if status != expected:
            result["outcome"] = f"http-{status}"
            return result
        parser = SseParser()
        outcome: list[str] = []
        errors: list[str] = []

        def on_body(chunk: bytes) -> bool:
            for event in parser.feed(chunk):
                if event.type == "error":
                    errors.append(event.data[:200])
                if event.type in TERMINAL:
                    outcome.append(event.type if event.type == "complete" else event.data[:200])
                    return True
            return False

        follow_headers = {"Authorization": f"Bearer {token}"}
        if job["mode"] != "spawn":
            follow_headers = {"Authorization": f"Bearer {job['admin_token']}"}
        status, _ = exchange(
            _connect,
            "GET",
            host,
            port,
            f"{api}/{user}/events",
            follow_headers,
            on_body=on_body,
            timeout=timeout,
        )
        result["events_status"] = status
        result["outcome"] = outcome[0] if outcome else f"unfinished-http-{status}"
        result["errors"] = errors
    except OSError as exc:
        result["outcome"] = f"client-{type(exc).__name__}"
    result["done_seconds"] = time.monotonic() - started
    result["done_at"] = time.monotonic()
    return result


def main() -> None:
    job = json.load(sys.stdin)
    go = gevent.event.Event()
    greenlets = [gevent.spawn(_one, job, user, token, go) for user, token in job["users"]]
    gevent.sleep(0.2)  # every greenlet parked at the barrier
    started = time.monotonic()
    go.set()
    gevent.joinall(greenlets)
    results = [
        g.value if g.successful() else {"outcome": f"client-{g.exception!r}"} for g in greenlets
    ]
    json.dump({"started_at": started, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()

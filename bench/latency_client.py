"""The latency benchmark's timing client, run as its own process:
``python -m bench.latency_client``.

Reads a job (JSON) on stdin and writes one result (JSON) on stdout. It spawns one user's lab
``spawns`` times in a row, each time following the event stream to its terminal event and
then deleting the lab (all but the last, which the benchmark inspects and deletes itself).

A process of its own because the emulators run as threads of the benchmark's main process:
a client sharing their interpreter waits for the GIL (up to its 5 ms switch interval) each
time it wakes, which measured the POST alone at 11-14 ms instead of 5-7 ms. JupyterHub, the
real client, is a process of its own too.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from bench.client import SpawnerClient


def run(job: dict[str, Any]) -> dict[str, Any]:
    client = SpawnerClient(job["url"], job["admin_token"])
    user, token, image = job["user"], job["token"], job["image"]
    count = int(job["spawns"])
    spawns: list[dict[str, Any]] = []
    for index in range(count):
        record: dict[str, Any] = {"wall_start": time.time()}
        started = time.perf_counter()
        response = client.spawn(user, token, image)
        record["post_seconds"] = time.perf_counter() - started
        if response.status_code != 303:
            record["kind"] = f"http-{response.status_code}"
            spawns.append(record)
            continue
        outcome = client.follow(user, token)
        record["kind"] = outcome.kind
        record["seconds"] = outcome.finished_at - started
        record["wall_end"] = time.time()
        if index < count - 1:
            deleting = time.perf_counter()
            client.delete(user)
            gone = client.follow(user, token)
            record["delete_kind"] = gone.kind
            record["delete_seconds"] = gone.finished_at - deleting
        spawns.append(record)
    return {"spawns": spawns}


def main() -> None:
    job = json.loads(sys.stdin.read())
    json.dump(run(job), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

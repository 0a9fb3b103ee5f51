"""The latency benchmark's timing client, run as its own process:
``python -m bench.latency_client``.

Reads one job (a JSON line) on stdin, then one command per line, and answers each command
with one JSON line on stdout:

- ``spawn``: spawn the user's lab, follow its event stream to the terminal event, then
  delete the lab and follow that to its end; answers the timings of both.
- ``spawn-keep``: the same without the delete (the benchmark inspects the running lab).

Commands rather than one run of every spawn, so the benchmark can replay the floor between
two spawns: both then sample the machine in the same state.

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


def spawn(client: SpawnerClient, job: dict[str, Any], *, delete: bool) -> dict[str, Any]:
    user, token, image = job["user"], job["token"], job["image"]
    record: dict[str, Any] = {"wall_start": time.time()}
    started = time.perf_counter()
    response = client.spawn(user, token, image)
    record["post_seconds"] = time.perf_counter() - started
    if response.status_code != 303:
        record["kind"] = f"http-{response.status_code}"
        return record
    outcome = client.follow(user, token)
    record["kind"] = outcome.kind
    record["seconds"] = outcome.finished_at - started
    record["wall_end"] = time.time()
    if delete:
        deleting = time.perf_counter()
        client.delete(user)
        gone = client.follow(user, token)
        record["delete_kind"] = gone.kind
        record["delete_seconds"] = gone.finished_at - deleting
    return record


def main() -> None:
    job = json.loads(sys.stdin.readline())
    client = SpawnerClient(job["url"], job["admin_token"])
    for line in sys.stdin:
        command = line.strip()
        if command not in ("spawn", "spawn-keep"):
            break
        result = spawn(client, job, delete=command == "spawn")
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

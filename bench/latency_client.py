"""The latency benchmark's timing client, run as its own process:
``python -m bench.latency_client``.

Reads one job (a JSON line) on stdin, then one command per line, and answers each command
with one JSON line on stdout:

- ``spawn``: spawn the user's lab, follow its event stream to the terminal event, then
  delete the lab and follow that to its end; answers the timings of both.
- ``spawn-keep``: the same without the delete (the benchmark inspects the running lab).

- ``reference <json>``: the calls and objects of the spawn the floor replays.
- ``replay <namespace>``: replay them into that namespace (``bench.floor``), then ask for
  its deletion; answers each call's duration.

Commands rather than one run of every spawn, so the benchmark can replay the floor between
two spawns: both then sample the machine in the same state. The floor is replayed from this
process too: the service calls the API server from processes of their own, and a client
in the emulators' process waited for their GIL (six creates in a row took 4.9 ms there
against 4.3 ms from a process of their own), which made the floor look larger than it is.

It speaks HTTP itself (``TimingClient``), on one kept-alive connection, as the status
benchmark leaves the load to wrk: the figure is the service's, not an HTTP library's.

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
from urllib.parse import urlsplit

from kubernetes import client as k8s

from bench.client import TERMINAL, Outcome
from bench.floor import Call, Replayer
from bench.rawhttp import KeepAliveConnection
from bench.sse import SseEvent, SseParser


class TimingClient:
    """The spawner API over one kept-alive connection, each request written in one piece.

    What it times should be the service's: ``requests`` spent about 0.8 ms preparing a
    POST before its first byte (and wrote headers and body apart), then more reading the
    answer and opening the event stream. The status benchmark uses wrk for the same reason.
    """

    def __init__(self, base_url: str, admin_token: str) -> None:
        parts = urlsplit(base_url)
        self._connection = KeepAliveConnection(parts.hostname or "127.0.0.1", parts.port or 80)
        self._api = f"{parts.path.rstrip('/')}/spawner/v1"
        self._admin = f"Bearer {admin_token}"

    def spawn(self, user: str, token: str, image: str, size: str = "small") -> int:
        body = json.dumps({"options": {"image": image, "size": size}, "env": {}}).encode()
        response = self._connection.request(
            "POST",
            f"{self._api}/labs/{user}/spawn",
            {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            body,
        )
        response.read()
        return response.status

    def delete(self, user: str) -> int:
        response = self._connection.request(
            "DELETE", f"{self._api}/labs/{user}", {"Authorization": self._admin}
        )
        response.read()
        return response.status

    def follow(self, user: str, token: str) -> Outcome:
        """Read the user's events until the operation completes or fails, then the rest of
        the stream (the service ends it right after), so the connection can be reused."""
        response = self._connection.request(
            "GET", f"{self._api}/labs/{user}/events", {"Authorization": f"Bearer {token}"}
        )
        if response.status != 200:
            response.read()
            return Outcome(f"http-{response.status}", time.perf_counter(), [])
        parser = SseParser()
        events: list[SseEvent] = []
        outcome: Outcome | None = None
        for chunk in response.chunks():
            if outcome is not None:
                continue
            for event in parser.feed(chunk):
                events.append(event)
                if event.type in TERMINAL:
                    outcome = Outcome(event.type, time.perf_counter(), events)
                    break
        return outcome or Outcome("unfinished", time.perf_counter(), events)


def spawn(client: TimingClient, job: dict[str, Any], *, delete: bool) -> dict[str, Any]:
    user, token, image = job["user"], job["token"], job["image"]
    record: dict[str, Any] = {"wall_start": time.time()}
    started = time.perf_counter()
    status = client.spawn(user, token, image)
    record["post_seconds"] = time.perf_counter() - started
    if status != 303:
        record["kind"] = f"http-{status}"
        return record
    outcome = client.follow(user, token)
    record["kind"] = outcome.kind
    record["seconds"] = outcome.finished_at - started
    record["wall_end"] = time.time()
    if delete:
        record["delete_wall_start"] = time.time()
        deleting = time.perf_counter()
        client.delete(user)
        gone = client.follow(user, token)
        record["delete_kind"] = gone.kind
        record["delete_seconds"] = gone.finished_at - deleting
        record["delete_wall_end"] = time.time()
    return record


def replay(replayer: Replayer, reference: dict[str, Any], target: str) -> dict[str, Any]:
    """The reference spawn's calls made again into ``target``, which is then deleted."""
    calls = [Call(**call) for call in reference["calls"]]
    result = replayer.replay(calls, reference["objects"], reference["namespace"], target)
    replayer.delete_namespace(target)
    return {"calls": result.calls, "watch_seconds": result.watch_seconds}


def main() -> None:
    job = json.loads(sys.stdin.readline())
    client = TimingClient(job["url"], job["admin_token"])
    configuration = k8s.Configuration(host=job["kube_url"])
    configuration.ssl_ca_cert = job["kube_ca"]
    replayer = Replayer(k8s.ApiClient(configuration))
    reference: dict[str, Any] = {}
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command in ("spawn", "spawn-keep"):
            result = spawn(client, job, delete=command == "spawn")
        elif command == "reference":
            reference = json.loads(argument)
            result = {"calls": len(reference["calls"])}
        elif command == "replay":
            result = replay(replayer, reference, argument)
        else:
            break
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

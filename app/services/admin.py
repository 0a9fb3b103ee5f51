"""What administrators see of the service's own work, and what they may do to it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import redis
from flask_sse import ServerSentEventsBlueprint

from app.engine.leadership import ElectedWorker
from app.engine.reads import WorkloadReads
from app.models.admin import Maintenance
from app.models.workload import Operation, WorkloadRef
from app.storage.admission import AdmissionStore
from app.storage.leader import read_leaderships
from app.storage.maintenance import MaintenanceStore
from app.storage.reconcile_requests import ReconcileRequests
from app.workloads.lab.store import LabStore


def operations_in_progress(
    workloads: WorkloadReads, admission: AdmissionStore | None = None
) -> list[dict[str, Any]]:
    """Every spawn or delete under way, oldest first, with the worker running it; then the
    creations waiting for a place (fair admission), in the order they will be admitted.

    An operation whose ``worker`` is null has lost its worker and waits for another one to
    resume it (within the lease time plus one scan), unless it has a ``position``: then it
    waits in the admission queue, where no worker runs it yet.
    """
    result = []
    for ref in workloads.pending():
        operation = workloads.operation(ref)
        if operation is not None:
            result.append(_operation_status(ref, operation, worker=workloads.lease_holder(ref)))
    for waiting in admission.queue() if admission is not None else []:
        operation = workloads.operation(waiting.ref)
        if operation is not None and operation.id == waiting.operation_id:
            status = _operation_status(waiting.ref, operation, worker=None)
            result.append({**status, "position": waiting.position, "group": waiting.group})
    return result


def _operation_status(
    ref: WorkloadRef, operation: Operation, *, worker: str | None
) -> dict[str, Any]:
    return {
        "username": ref.name,
        "workload": ref.kind,
        "kind": operation.action.value,
        "id": operation.id,
        "started": operation.started,
        "deadline": operation.deadline,
        "worker": worker,
    }


def follow_feed(channel: str, feed: ServerSentEventsBlueprint) -> Iterator[str]:
    """The administrators' live feed as server-sent events (see ``storage.admin_feed``).

    A comment comes first, so the client has its headers at once rather than at the first
    event. flask-sse finds Redis through the app (its feed client, which reaches Redis by
    URL or through Sentinel): the route streams this in the request's context
    (``stream_with_context``).
    """
    yield ": live feed\n\n"
    for message in feed.messages(channel=channel):
        yield str(message)


def leaders(client: redis.Redis, elections: list[ElectedWorker]) -> list[dict[str, Any]]:
    """Each elected loop with the replica and worker leading it (as its lease in Redis says,
    so every replica answers alike), or no leader while an election is due."""
    found = read_leaderships(client, [(e.loop, e.lease_key) for e in elections])
    result: list[dict[str, Any]] = []
    for election, leadership in zip(elections, found, strict=True):
        leader = None
        if leadership is not None:
            leader = {
                "replica": asdict(leadership.replica),
                "worker": leadership.owner,
                "worker_pid": leadership.worker_pid,
                "token": leadership.token,
                "since": leadership.since,
                "expires_in": leadership.expires_in,
            }
        result.append({"loop": election.loop, "leader": leader})
    return result


def maintenance_state(store: MaintenanceStore, *, detail: str = "") -> dict[str, Any]:
    """Maintenance mode as the routes answer it."""
    current = store.current()
    state: dict[str, Any] = {
        "enabled": current is not None,
        "message": current.message if current else None,
        "since": current.since if current else None,
        "by": current.by if current else None,
    }
    if detail:
        state["detail"] = detail
    return state


def turn_maintenance_on(store: MaintenanceStore, *, message: str, by: str) -> dict[str, Any]:
    """New creations are refused from now on, in every worker of every replica."""
    store.turn_on(Maintenance(message=message, since=time.time(), by=by))
    return maintenance_state(store, detail=f"on: {message}")


def turn_maintenance_off(store: MaintenanceStore) -> dict[str, Any]:
    was = store.turn_off()
    return maintenance_state(store, detail="off" if was else "was already off")


RECONCILE_WAIT_SECONDS = 30.0
"""How long ``POST /spawner/v1/admin/reconcile`` waits for the reconcile it asked for."""


def reconcile_now(
    requests: ReconcileRequests, *, wait_seconds: float = RECONCILE_WAIT_SECONDS
) -> tuple[dict[str, Any], int]:
    """Ask the elected watcher, wherever it leads, for a reconcile now; wait for it up to
    ``wait_seconds``: 200 with how it ended, or 202 while it has not (it still runs)."""
    request_id = uuid.uuid4().hex
    requests.ask(request_id)
    deadline = time.monotonic() + wait_seconds
    while True:
        result = requests.result(request_id)
        if result is not None:
            detail = "complete" if result.complete else "Redis was emptied meanwhile"
            return {
                "request": request_id,
                "finished": result.finished,
                "complete": result.complete,
                "detail": f"reconciled: {detail}",
            }, 200
        if time.monotonic() >= deadline:
            return {
                "request": request_id,
                "finished": None,
                "complete": None,
                "detail": "requested; not finished in time",
            }, 202
        time.sleep(0.2)


def reset_provisioned(labs: LabStore, username: str) -> dict[str, Any]:
    """The user's next spawn runs the provisioning init containers again."""
    was = labs.unmark_provisioned(username)
    return {
        "username": username,
        "was_provisioned": was,
        "detail": "provisioned flag cleared" if was else "was not provisioned",
    }

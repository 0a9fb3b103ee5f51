"""What administrators see of the service's own work."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import redis

from app.extensions.redis import feed_events
from app.services.leadership import ElectedWorker
from app.storage.leader import read_leaderships
from app.storage.workloads import WorkloadStore


def operations_in_progress(store: WorkloadStore) -> list[dict[str, Any]]:
    """Every spawn or delete under way, oldest first, with the worker running it.

    An operation whose ``worker`` is null has lost its worker and waits for another one to
    resume it (within the lease time plus one scan).
    """
    result = []
    for ref in store.pending():
        operation = store.operation(ref)
        if operation is None:
            continue
        result.append(
            {
                "username": ref.name,
                "kind": operation.action.value,
                "id": operation.id,
                "started": operation.started,
                "deadline": operation.deadline,
                "worker": store.lease_holder(ref),
            }
        )
    return result


def follow_feed(store: WorkloadStore) -> Iterator[str]:
    """The administrators' live feed as server-sent events (see ``storage.admin_feed``).

    A comment comes first, so the client has its headers at once rather than at the first
    event. flask-sse finds Redis through the app (its feed client, which reaches Redis by
    URL or through Sentinel): the route streams this in the request's context
    (``stream_with_context``).
    """
    yield ": live feed\n\n"
    for message in feed_events.messages(channel=store.feed_channel):
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

"""What administrators see of the service's own work."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flask_sse import sse

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
    event. flask-sse finds Redis through the app: the route streams this in the request's
    context (``stream_with_context``).
    """
    yield ": live feed\n\n"
    for message in sse.messages(channel=store.feed_channel):
        yield str(message)

"""What administrators see of the service's own work."""

from __future__ import annotations

from typing import Any

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

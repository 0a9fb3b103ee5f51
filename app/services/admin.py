"""What administrators see of the service's own work."""

from __future__ import annotations

from typing import Any

from app.services.context import LabContext


def operations_in_progress(ctx: LabContext) -> list[dict[str, Any]]:
    """Every spawn or delete under way, oldest first, with the worker running it.

    An operation whose ``worker`` is null has lost its worker and waits for another one to
    resume it (within the lease time plus one scan).
    """
    result = []
    for username in ctx.labs.pending_operations():
        operation = ctx.labs.operation(username)
        if operation is None:
            continue
        result.append(
            {
                "username": username,
                "kind": operation.kind.value,
                "id": operation.id,
                "started": operation.started,
                "deadline": operation.deadline,
                "worker": ctx.labs.lease_holder(username),
            }
        )
    return result

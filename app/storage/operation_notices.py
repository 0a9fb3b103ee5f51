"""Notices that an operation was queued, published for the runner processes.

A web process queues an operation in Redis (record, operation and pending set in one
script) and leaves running it to the runners. So that a runner starts it at once rather
than at its next scan, the web process then publishes the workload's key here; every
runner process receives it on its event hub's one subscription (``app.storage.event_hub``)
and the one whose lease acquisition wins runs the operation.

A notice is only a hint. One published while no runner is subscribed is lost, and a runner
finds the operation anyway in the pending set: at its next scan, and at once whenever its
subscription holds again after a gap.
"""

from __future__ import annotations

import redis

from app.models.workload import WorkloadRef


class OperationNotices:
    """The channel that tells runner processes of newly queued operations."""

    def __init__(self, client: redis.Redis, key_prefix: str) -> None:
        self._redis = client
        self.channel = f"{key_prefix}operations"

    def publish(self, ref: WorkloadRef) -> None:
        """Tell the runners that ``ref`` has an operation to run."""
        self._redis.publish(self.channel, ref.key)

    @staticmethod
    def parse(payload: str) -> WorkloadRef | None:
        """The workload a notice names; None for a payload that names none."""
        try:
            return WorkloadRef.from_key(payload)
        except ValueError:
            return None

"""Who runs an operation once it is queued: this process's runner, or the runner processes.

In a process that runs operations (the ``runner`` and ``all`` roles) the engine hands a
queued operation to its own ``OperationRunner``, which starts it at once. A ``web`` process
runs none: ``RunnerNotices`` publishes a notice instead (``app.storage.operation_notices``),
and a runner process takes it from there. Both run an admission pass the same way when a
delete withdraws a spawn from its place or the queue, so what it admits starts as quickly.
"""

from __future__ import annotations

import logging
from typing import Protocol

import redis

from app.engine.admission import Admission
from app.models.workload import WorkloadRef
from app.storage.operation_notices import OperationNotices

logger = logging.getLogger(__name__)


class OperationDispatch(Protocol):
    """Where the engine hands the operations it queued."""

    def submit(self, ref: WorkloadRef) -> None:
        """``ref`` has an operation to run."""

    def admit(self, *, withdraw: WorkloadRef | None = None) -> None:
        """Run an admission pass, ``withdraw`` leaving its place or the queue, and have what
        it admits run."""


class RunnerNotices:
    """The web role's dispatch: operations are run by the runner processes, told by notice."""

    def __init__(self, notices: OperationNotices, admission: Admission | None) -> None:
        self._notices = notices
        self._admission = admission

    def submit(self, ref: WorkloadRef) -> None:
        try:
            self._notices.publish(ref)
        except redis.RedisError as exc:
            # The operation is queued: a runner's scan finds it without the notice.
            logger.warning(
                "notice of %s not published: Redis unavailable (%s)", ref.key, type(exc).__name__
            )

    def admit(self, *, withdraw: WorkloadRef | None = None) -> None:
        if self._admission is None:
            return
        try:
            admitted = self._admission.admit(withdraw=withdraw)
        except redis.RedisError as exc:
            logger.warning("admission pass skipped: Redis unavailable (%s)", type(exc).__name__)
            return
        for ref in admitted:
            self.submit(ref)

"""Fair admission: how many creations run at once, and who goes next.

Every creation of a kind that declares ``admitted`` (a lab's spawn, a cluster, a kernel, an
app starting) is queued with a *group*, chosen by its service (a user's group, an app's
group). With ``admission.maxInProgress`` set, at most that many such operations are under
way across every worker and replica; a creation beyond them waits in one queue in Redis,
fair between groups (a turn admits one operation of each group waiting, round-robin) and
first come, first served within a group. A waiting operation is recorded like any other,
but no runner takes it and it holds no runner slot; its event stream says its position and
moves it as it advances. Deletes are never admitted: they go straight to the runner, and a
delete of a waiting spawn withdraws it from the queue.

A place belongs to its operation: it is given back when the operation ends, fails or is
superseded, by whichever worker sees that first, and a place whose operation is gone is
dropped by the next count that finds the places full, so a worker dying at any point
never loses one. Any worker admits: the one whose operation just ended, the one queueing a
delete, and every worker's scanner, which also admits everything left waiting once
admission is turned off.

Also here, because it shares the group: the per-group rate of creations
(``limits.groupMutationsPerMinute``), 429 past it.
"""

from __future__ import annotations

import logging

from app.errors import QueueFullError, TooManyRequestsError
from app.models.config import AdmissionConfig
from app.models.workload import Action, Operation, WorkloadRef
from app.storage.admission import AdmissionRequest, AdmissionStore
from app.storage.rate_limits import RateLimits

logger = logging.getLogger(__name__)

POSITION_TEXT = "Waiting for a place to start: number {position} in the queue"
"""The event telling a waiting operation where it is (``{position}`` is the number)."""
STARTED_TEXT = "A place is free: starting"
"""The event telling a waiting operation that it was admitted."""
GROUP_WINDOW_SECONDS = 60.0
QUEUE_FULL_RETRY_SECONDS = 10
"""Retry-After of a creation refused because the queue is full: long enough for a few
operations to finish, short enough that a user's retry does not wait for nothing."""


class Admission:
    """This process's view of fair admission: settings, Redis state and the group rate."""

    def __init__(
        self,
        store: AdmissionStore,
        config: AdmissionConfig,
        *,
        rates: RateLimits,
        group_mutations_per_minute: int = 0,
    ) -> None:
        self.store = store
        self.config = config
        self._rates = rates
        self._group_limit = group_mutations_per_minute

    @property
    def enabled(self) -> bool:
        """Whether creations beyond a number in progress wait (``maxInProgress`` > 0)."""
        return self.config.max_in_progress > 0

    def count(self, group: str) -> None:
        """Count a creation of ``group``; 429 past ``limits.groupMutationsPerMinute``."""
        if self._group_limit <= 0:
            return
        wait = self._rates.take(
            scope="group-mutations",
            name=group,
            limit=self._group_limit,
            window_seconds=GROUP_WINDOW_SECONDS,
        )
        if wait:
            raise TooManyRequestsError(
                f"at most {self._group_limit} creations a minute by the members of {group}; "
                f"try again in {wait}s",
                retry_after=wait,
            )

    def request(self, group: str) -> AdmissionRequest | None:
        """What to queue a creation of ``group`` with; None while admission is off."""
        if not self.enabled:
            return None
        return self.store.request(
            group=group,
            places=self.config.max_in_progress,
            max_waiting=self.config.max_waiting,
            position_text=POSITION_TEXT,
        )

    def queue_full(self) -> QueueFullError:
        return QueueFullError(
            f"{self.config.max_waiting} creations are already waiting for a place; "
            "try again shortly",
            retry_after=QUEUE_FULL_RETRY_SECONDS,
        )

    def is_waiting(self, operation: Operation) -> bool:
        """Whether ``operation`` waits in the queue: no runner may start it yet."""
        if operation.action is not Action.SPAWN:
            return False
        return self.store.waiting_operation(operation.ref) == operation.id

    def admit(
        self, *, ended: Operation | None = None, withdraw: WorkloadRef | None = None
    ) -> list[WorkloadRef]:
        """An admission pass: give back the place of ``ended`` (an operation that ended or
        was superseded), withdraw ``withdraw``'s superseded waiting operation, and admit
        what the free places allow (everything waiting while admission is off). Returns
        the workloads admitted, for the caller's runner to take."""
        return self.store.admit(
            places=self.config.max_in_progress,
            position_text=POSITION_TEXT,
            started_text=STARTED_TEXT,
            release=(ended.ref, ended.id) if ended is not None else None,
            withdraw=withdraw,
        )

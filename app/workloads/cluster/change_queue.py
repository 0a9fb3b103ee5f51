"""How the scaler's requests become a cluster's operations, and wait for them.

The scaler's design answers a change when it is done (the scale's numbers, the patched
object, the deleted head), so each request queues its change as an operation on the
cluster (``changes``) and follows that operation's events until it ends. One operation at
a time runs on a cluster: a change sent while the cluster is being created, or while
another change runs, waits for that one to end and is then checked again and queued, as the
design's scaler, which patched at once whatever the state, would have taken it. The waits
are bounded: a cluster busy for longer is answered 503 ``dependency_unavailable``, and the
change still under way goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from app.engine.engine import Engine
from app.errors import ClusterNotFoundError, DependencyUnavailableError, QuotaExceededError
from app.models.identity import UserInfo
from app.models.usage import Usage
from app.models.workload import WorkloadStatus
from app.storage.events import Event, EventType
from app.workloads.budgets import budget_for, budget_lock, budget_refusal
from app.workloads.cluster.models import ClusterRecord
from app.workloads.cluster.quota import cluster_held
from app.workloads.cluster.records import cluster_json, parse_cluster
from app.workloads.cluster.service import ClusterService
from app.workloads.context import WorkloadContext
from app.workloads.quota import sync_lab_quota
from app.workloads.refs import cluster_ref

WAIT_SECONDS = 30.0
"""How long a request waits for the operation under way on its cluster (its creation,
another change) to end, and then as long for its own. A notebook that creates a cluster
and scales it at once is answered as if it had waited, not refused because the operator's
object is not there or the cluster not running yet."""

QUIET_SECONDS = 1.0
"""How often a wait with no new events looks at its deadline."""

State = TypeVar("State")
"""What a change is planned from besides the record (the operator's object, the heads)."""


@dataclass(frozen=True)
class Planned:
    """A change, checked: the record the cluster is to have, the operation's spec, who
    asked what (its first event), and the answer's part known before it runs."""

    record: ClusterRecord
    spec: dict[str, Any]
    asked: str
    answer: dict[str, Any]


@dataclass(frozen=True)
class Done:
    """A change's operation, ended: as planned, and its events (the last one terminal)."""

    planned: Planned
    events: list[Event]

    @property
    def failure(self) -> str | None:
        """Why it failed; None when it is complete."""
        last = self.events[-1]
        return last.data if last.type is EventType.FAILED else None


class ChangeQueue:
    """Queues the scaler's changes on the clusters' operations and waits for them."""

    def __init__(self, ctx: WorkloadContext, engine: Engine, clusters: ClusterService) -> None:
        self._ctx = ctx
        self._engine = engine
        self._clusters = clusters

    def created(self, record: ClusterRecord) -> ClusterRecord:
        """``record`` as it is once its creation ended (running, or failed), waiting for
        that at most ``WAIT_SECONDS``; at once for a cluster not starting."""
        if record.status is not WorkloadStatus.STARTING:
            return record
        self._operation_events(record, time.monotonic() + WAIT_SECONDS)
        return self._clusters.one(record.owner, record.name)

    def run(
        self,
        user: UserInfo | None,
        state: tuple[ClusterRecord, State],
        plan: Callable[[ClusterRecord, State], Planned],
        again: Callable[[], tuple[ClusterRecord, State]],
    ) -> Done:
        """Plan the change from the cluster's ``state``, queue it and wait for it to end.

        While another operation holds the cluster (or its record changed since it was
        read), wait for it, read the state again (``again``) and plan anew: the checks of
        ``plan`` see the cluster as the change will find it."""
        record, found = state
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            planned = plan(record, found)
            if self._queue(user, record, planned):
                break
            self._operation_events(record, deadline)
            if time.monotonic() > deadline:
                _busy(record)
            record, found = again()
        events = self._operation_events(record, time.monotonic() + WAIT_SECONDS)
        if not events or not events[-1].terminal:
            raise DependencyUnavailableError(
                f"the change of cluster {record.name} is not done within {WAIT_SECONDS:g} "
                "seconds; it goes on"
            )
        return Done(planned, events)

    def _queue(self, user: UserInfo | None, record: ClusterRecord, planned: Planned) -> bool:
        """Record the planned change and queue its operation, under the owner's budget
        lock; False when the record is no longer ``record`` or an operation holds it.

        A change of what the cluster holds is checked against the owner's budget like a
        creation, though only what grows, so a user over a lowered budget may still
        shrink; it is the owner's budget also when an administrator makes the change (the
        owner's groups then come from their lab's record). The lab namespace's quota takes
        the cluster's new shape before its operation changes any pod."""
        name = record.name
        with budget_lock(self._engine, record.owner):
            held = self._clusters.holdings(record.owner)
            raw = self._engine.workloads.record(cluster_ref(record.owner, name))
            if raw is None:
                _gone(name)
            if parse_cluster(raw) != record:
                return False
            if planned.record != record:
                self._within_budget(user, held.usage(), record, planned.record)
                sync_lab_quota(
                    self._ctx, held.with_held(cluster_held(planned.record, self._ctx.config))
                )
            queued = self._engine.queue_spawn(
                cluster_ref(record.owner, name),
                record=cluster_json(planned.record),
                spec=planned.spec,
                secret=None,
                first_events=[(EventType.INFO, planned.asked)],
                expect=cluster_json(record),
            )
        return queued.queued

    def _within_budget(
        self, user: UserInfo | None, held: Usage, record: ClusterRecord, wanted: ClusterRecord
    ) -> None:
        if user is None or user.username != record.owner:
            user = self._clusters.owner(record.owner)
        if user is None:
            return
        budget = budget_for(user, self._ctx.config.budgets)
        growth = Usage.from_json(wanted.usage) - Usage.from_json(record.usage)
        refusal = budget_refusal(budget, held, growth)
        if refusal is not None:
            raise QuotaExceededError(refusal)

    def _operation_events(self, record: ClusterRecord, deadline: float) -> list[Event]:
        """The events of the operation under way on the cluster (or of its last one) until
        its terminal one, or until ``deadline`` (``time.monotonic``) passes."""
        ref = cluster_ref(record.owner, record.name)
        following = self._engine.follow(ref, after="0-0", idle_seconds=QUIET_SECONDS)
        events: list[Event] = []
        if following is None:
            return events
        try:
            for batch in following:
                events.extend(batch or ())
                if (events and events[-1].terminal) or time.monotonic() > deadline:
                    break
        finally:
            following.close()
        return events


def _busy(record: ClusterRecord) -> NoReturn:
    raise DependencyUnavailableError(
        f"cluster {record.name} is still busy with another operation after "
        f"{WAIT_SECONDS:g} seconds; ask again"
    )


def _gone(name: str) -> NoReturn:
    raise ClusterNotFoundError(f"cluster {name} is gone")

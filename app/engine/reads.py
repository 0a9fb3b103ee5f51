"""The engine's records as everything outside the engine reads them.

The store (``WorkloadStore``, its Lua) is the engine's own: what it writes it writes through
the engine's named steps (queue, finish, put while current). Services, a kind's stores and
the administrators' views read it here, and make the few changes that need no operation (an
administrator's decision, a repair) with ``put_if_idle``, so every answer a rebuild could
make partial says ``rebuilding`` the same way.
"""

from __future__ import annotations

from app.errors import RebuildingError
from app.models.workload import Operation, WorkloadRef
from app.storage.leader import RedisLease
from app.storage.workloads import (
    FailedWorkload,
    RecordAndBusy,
    StoredNames,
    StoredRecord,
    WorkloadStore,
)


class WorkloadReads:
    """Reads of the workloads' records and operations, and idle writes."""

    def __init__(self, store: WorkloadStore) -> None:
        self._store = store

    # Records -------------------------------------------------------------------------

    def record(self, ref: WorkloadRef) -> str | None:
        """``ref``'s record as stored; None when there is none (or none yet, during a
        rebuild: ``require_complete`` tells those apart)."""
        return self._store.record(ref)

    def stored_record(self, ref: WorkloadRef) -> StoredRecord:
        """The record and whether Redis holds every workload, in one round trip."""
        return self._store.stored_record(ref)

    def records(self, kind: str) -> dict[str, str]:
        """Every record of ``kind`` by name; complete only once ``is_complete``."""
        return self._store.records(kind)

    def names(self, kind: str) -> list[str]:
        return self._store.names(kind)

    def stored_names(self, kind: str) -> StoredNames:
        """The kind's names and whether Redis holds every workload, in one round trip."""
        return self._store.stored_names(kind)

    def record_and_busy(self, ref: WorkloadRef) -> RecordAndBusy:
        return self._store.record_and_busy(ref)

    def failed(
        self, kind: str, *, before: float | None = None, limit: int = 1000
    ) -> list[FailedWorkload]:
        """The workloads of ``kind`` whose record says ``failed``, oldest first."""
        return self._store.failed(kind, before=before, limit=limit)

    def put_if_idle(self, *, ref: WorkloadRef, record: str, expect: str | None) -> bool:
        """Write ``record`` while no operation works on ``ref`` and its record is still
        ``expect``: a change that needs no steps (an administrator's decision, a repair).
        False when an operation started or ended since ``expect`` was read."""
        return self._store.put_if_idle(ref=ref, record=record, expect=expect)

    # Completeness --------------------------------------------------------------------

    def is_complete(self) -> bool:
        """Whether Redis holds every workload (false while they are rebuilt from
        Kubernetes after Redis came back empty)."""
        return self._store.is_complete()

    def require_complete(self) -> None:
        """503 ``rebuilding`` while Redis does not hold every workload: an answer read now
        could leave out what exists."""
        if not self._store.is_complete():
            raise RebuildingError()

    @property
    def complete_key(self) -> str:
        """What the readiness probe reads, with its own client, to say ``rebuilding``."""
        return self._store.complete_key

    # Operations ----------------------------------------------------------------------

    def operation(self, ref: WorkloadRef) -> Operation | None:
        return self._store.operation(ref)

    def pending(self) -> list[WorkloadRef]:
        """Workloads with an operation queued or under way, oldest first."""
        return self._store.pending()

    def lease_holder(self, ref: WorkloadRef) -> str | None:
        """The worker running ``ref``'s operation, if one is."""
        return self._store.lease_holder(ref)

    def lock(self, ref: WorkloadRef, owner: str, ttl_seconds: float) -> RedisLease:
        """A lease on a name that is not a workload's (``ref`` of a kind no engine runs),
        for a service that serializes its own checks (a user's budget)."""
        return self._store.lease(ref, owner, ttl_seconds)

    @property
    def feed_channel(self) -> str:
        """Where every record change is announced (the administrators' live feed)."""
        return self._store.feed_channel

"""Lab records as typed objects, and the provisioned-user flags.

Labs are the ``lab`` kind of workload: their records live where the engine keeps every
kind's, under the user's name, and are read here through the engine's ``WorkloadReads``.
This module only converts: a ``LabRecord`` in, the status body's JSON out, and back.
"""

from __future__ import annotations

import json

import redis

from app.engine.reads import WorkloadReads
from app.models.lab import LabApi, LabRecord, PodState
from app.models.workload import WorkloadRef, WorkloadStatus
from app.schemas.labs import LabStatusSchema
from app.storage.workloads import StoredNames, StoredRecord, WorkloadStore

LAB_KIND = "lab"
"""The labs' kind among the workloads."""


def lab_ref(username: str) -> WorkloadRef:
    """The workload that is ``username``'s lab (a user has at most one)."""
    return WorkloadRef(LAB_KIND, username)


_STATUS = LabStatusSchema()
"""The one description of a lab's status: the record in Redis, the routes' body, the docs."""


def record_json(record: LabRecord) -> str:
    """The text a lab record is stored as: the status routes' body, served as stored."""
    return json.dumps(_STATUS.dump(record))


def parse_record(raw: str) -> LabRecord:
    """A stored record. Fields a record may lack (an older one, or one rebuilt from a pod)
    read as empty rather than failing a watcher or a reconcile."""
    data = _STATUS.load(json.loads(raw), partial=True)
    return LabRecord(
        username=data["username"],
        status=WorkloadStatus(data["status"]),
        pod=PodState(data["pod"]),
        options=dict(data.get("options") or {}),
        env=dict(data.get("env") or {}),
        uid=data.get("uid"),
        gid=data.get("gid"),
        groups=list(data.get("groups") or []),
        quotas=dict(data.get("quotas") or {}),
        internal_url=data.get("internal_url"),
        error=data.get("error"),
        api=LabApi(data.get("api") or LabApi.DMTN_222),
    )


class LabStore:
    """Reads and repairs of lab records, and who has been provisioned."""

    def __init__(self, client: redis.Redis, key_prefix: str, workloads: WorkloadReads) -> None:
        self._redis = client
        self.workloads = workloads
        self._provisioned = f"{key_prefix}provisioned"

    @classmethod
    def reading(cls, client: redis.Redis, key_prefix: str) -> LabStore:
        """The labs of the service whose Redis keys start with ``key_prefix``, read from
        outside its processes (the benchmarks, the local stack's tools)."""
        return cls(client, key_prefix, WorkloadReads(WorkloadStore(client, key_prefix)))

    def get_json(self, username: str) -> str | None:
        """The record as stored: already the status routes' JSON body."""
        return self.workloads.record(lab_ref(username))

    def stored_json(self, username: str) -> StoredRecord:
        """The record as stored, and whether Redis holds every lab (see ``WorkloadStore``)."""
        return self.workloads.stored_record(lab_ref(username))

    def stored_usernames(self) -> StoredNames:
        return self.workloads.stored_names(LAB_KIND)

    def get(self, username: str) -> LabRecord | None:
        raw = self.get_json(username)
        return parse_record(raw) if raw else None

    def usernames(self) -> list[str]:
        return self.workloads.names(LAB_KIND)

    def records(self) -> dict[str, LabRecord]:
        """Every lab record by username (the reconcile compares them all at once)."""
        return {name: parse_record(raw) for name, raw in self.workloads.records(LAB_KIND).items()}

    def get_unless_busy(self, username: str) -> tuple[LabRecord | None, bool]:
        """The record, and whether an operation is under way for the lab."""
        found = self.workloads.record_and_busy(lab_ref(username))
        return (parse_record(found.record) if found.record else None), found.busy

    def has_operation(self, username: str) -> bool:
        return self.workloads.operation(lab_ref(username)) is not None

    def put_if_idle(self, record: LabRecord, expect: LabRecord | None) -> bool:
        """Replace the record when no operation runs and it still equals ``expect`` (None:
        there is no record). Records are written only through ``record_json``, so the text
        of an equal record is the same text."""
        return self.workloads.put_if_idle(
            ref=lab_ref(record.username),
            record=record_json(record),
            expect=record_json(expect) if expect is not None else None,
        )

    # Provisioning --------------------------------------------------------------------

    def is_provisioned(self, username: str) -> bool:
        return bool(self._redis.sismember(self._provisioned, username))

    def mark_provisioned(self, username: str) -> None:
        self._redis.sadd(self._provisioned, username)

    def unmark_provisioned(self, username: str) -> bool:
        """Forget that the user was provisioned (their next spawn provisions again); whether
        they were."""
        return bool(self._redis.srem(self._provisioned, username))

"""Users' file servers: start one on request and wait until it serves, tell who has one,
and stop one.

A user asks for their file server by opening ``/files``: if none runs, its creation is
queued and the request waits (at most ``fileserver.creationTimeout``) until the server
answers, so that the page it gets back points at a server that works. While one runs the
answer is immediate. A server that is being removed (stopped, or ended by itself) is waited
for and then started anew. Nothing here counts against a user's budget: a file server is
small, and one per user.
"""

from __future__ import annotations

import time
from dataclasses import replace

from app.engine.engine import Engine
from app.engine.service import RecordCodec, WorkloadService
from app.errors import (
    DependencyUnavailableError,
    InvalidRequestError,
    NotFoundError,
    RebuildingError,
    ServiceError,
)
from app.models.identity import UserInfo
from app.models.workload import WorkloadStatus
from app.storage.event_hub import Following
from app.storage.events import EventType
from app.timestamps import iso_utc
from app.workloads.context import WorkloadContext
from app.workloads.fileserver.config import FileserverConfig, fileserver_config
from app.workloads.fileserver.models import (
    FILESERVER_KIND,
    FileserverRecord,
    RunAs,
    fileserver_ref,
)
from app.workloads.fileserver.records import fileserver_json, parse_fileserver

FILESERVER_RECORDS = RecordCodec(
    kind=FILESERVER_KIND,
    noun="file server",
    parse=parse_fileserver,
    dump=fileserver_json,
    terminating=lambda record: replace(record, status=WorkloadStatus.TERMINATING),
)
QUIET_SECONDS = 0.5
WAIT_MARGIN_SECONDS = 5.0
"""What a request waiting for a server gives the operation beyond its deadline: the time a
worker takes to see it passed and say so."""


class FileserverFailedError(ServiceError):
    """The user's file server could not start; the message says why."""

    status = 500
    code = "fileserver_failed"


class FileserverService(WorkloadService[FileserverRecord]):
    def __init__(self, ctx: WorkloadContext, engine: Engine) -> None:
        super().__init__(
            engine, FILESERVER_RECORDS, idle_seconds=ctx.config.operations.keepalive_seconds
        )
        self._ctx = ctx
        self.config: FileserverConfig = fileserver_config(ctx.config)

    def require_enabled(self) -> None:
        """404 where file servers are not enabled: their routes do not exist there."""
        if not self.config.enabled:
            raise NotFoundError("file servers are not enabled on this platform")

    # Reads ---------------------------------------------------------------------------

    def running(self, username: str) -> FileserverRecord:
        """The user's file server while it starts or runs; 404 when there is none."""
        record = self.find(fileserver_ref(username), missing=_missing(username))
        if record.status not in (WorkloadStatus.STARTING, WorkloadStatus.RUNNING):
            raise NotFoundError(_missing(username))
        return record

    def one(self, username: str) -> FileserverRecord:
        """The user's file server's record, whatever its status; 404 when there is none."""
        return self.find(fileserver_ref(username), missing=_missing(username))

    def users(self) -> list[str]:
        """The users with a file server starting or running, sorted."""
        return sorted(
            r.username
            for r in self.all()
            if r.status in (WorkloadStatus.STARTING, WorkloadStatus.RUNNING)
        )

    def events(self, username: str, *, after: str) -> Following:
        return self.follow_events(fileserver_ref(username), after=after, missing=_missing(username))

    # Start and stop ------------------------------------------------------------------

    def ensure(self, user: UserInfo) -> FileserverRecord:
        """The user's running file server: started if none runs, and waited for."""
        run_as = RunAs.of(user)
        if run_as is None:
            raise InvalidRequestError(
                f"user {user.username} has no UID or GID to run a file server as"
            )
        ref = fileserver_ref(user.username)
        waiting = self.config.creation_timeout + WAIT_MARGIN_SECONDS
        deadline = time.monotonic() + waiting
        queued = False
        while time.monotonic() < deadline:
            raw = self._engine.workloads.record(ref)
            record = parse_fileserver(raw) if raw is not None else None
            if record is not None and record.status is WorkloadStatus.RUNNING:
                return record
            if record is None or record.status is WorkloadStatus.FAILED:
                if record is None:
                    self.require_complete()
                queued = self._queue(user.username, run_as) or queued
            end = self.await_end(ref, seconds=max(0.0, deadline - time.monotonic()))
            if end is None:
                # No operation to follow (its events expired, or it ended between the
                # reads): look again shortly rather than at once.
                time.sleep(min(QUIET_SECONDS, max(0.0, deadline - time.monotonic())))
            elif end.type is EventType.FAILED and queued:
                raise FileserverFailedError(
                    f"the file server of {user.username} could not start: {end.data}"
                )
        raise DependencyUnavailableError(
            f"the file server of {user.username} did not start within {waiting:g} seconds; "
            "it goes on: ask again"
        )

    def _queue(self, username: str, run_as: RunAs) -> bool:
        """Queue the server's creation; False when another request's is already queued (or
        its record changed meanwhile)."""
        record = FileserverRecord(username=username, created=iso_utc(time.time()) or "")
        queued = self._engine.queue_spawn(
            fileserver_ref(username),
            record=fileserver_json(record),
            spec=run_as.to_spec(),
            secret=None,
            first_events=[(EventType.INFO, f"File server of {username} requested")],
        )
        if queued.rebuilding:
            raise RebuildingError()
        return queued.queued

    def stop(self, username: str) -> FileserverRecord:
        """Queue the deletion of the user's file server; its record as it began. 404 when
        there is none."""
        return self.start_delete(
            fileserver_ref(username),
            missing=_missing(username),
            first_events=[(EventType.INFO, f"Deletion of the file server of {username} requested")],
        )

    def stop_and_wait(self, username: str) -> None:
        """Delete the user's file server and return once it is gone (nublado's ``DELETE``)."""
        self.stop(username)
        self.await_end(
            fileserver_ref(username), seconds=self.config.delete_timeout + WAIT_MARGIN_SECONDS
        )


def _missing(username: str) -> str:
    return f"user {username} has no file server"

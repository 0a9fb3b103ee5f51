"""File-server records as the engine stores them, and as a Job tells them.

A record is stored as its schema (``FileserverRecordSchema``) dumps it. A record Redis lost
is made again from the user's Job: its labels name the user, its creation is when the
server was asked for, and its status says whether the server answers yet.
"""

from __future__ import annotations

from typing import Any

from app.models.workload import WorkloadStatus
from app.schemas.records import RecordText
from app.workloads.fileserver.models import FileserverRecord
from app.workloads.fileserver.schemas import FileserverRecordSchema

FILESERVER_TEXT = RecordText(FileserverRecord, FileserverRecordSchema)
fileserver_json = FILESERVER_TEXT.dump
parse_fileserver = FILESERVER_TEXT.parse


def job_finished(job: dict[str, Any]) -> str | None:
    """Why the Job has ended (its server exited: idle, stopped, or failed), or None while
    it runs; read from the conditions the Job controller sets."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return "the file server stopped by itself (no request within its idle timeout)"
        if condition.get("type") == "Failed":
            reason = condition.get("message") or condition.get("reason") or "its pod failed"
            return f"the file server's Job failed: {reason}"
    return None


def job_status(job: dict[str, Any]) -> WorkloadStatus:
    """Running once its pod is ready (the server accepts connections), else starting."""
    ready = int((job.get("status") or {}).get("ready") or 0)
    return WorkloadStatus.RUNNING if ready > 0 else WorkloadStatus.STARTING


def record_from_job(job: dict[str, Any], username: str) -> FileserverRecord | None:
    """The record a Job of ``username``'s stands for; None for one going away. An ended
    Job's record is made too, so that its end is then seen (``FileserverTracking.ended``)
    and what is left of it removed."""
    meta = job.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return None
    return FileserverRecord(
        username=username,
        created=str(meta.get("creationTimestamp") or ""),
        status=job_status(job),
    )

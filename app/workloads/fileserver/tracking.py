"""How file-server records follow their Jobs between operations (see ``app.engine.tracking``).

A file server is its Job: the record is ``starting`` until the Job's pod is ready and
``running`` while it is. A server ends by itself (it exits after its idle timeout, and its
Job completes), or its Job fails or is deleted behind the service: the engine then deletes
what is left (Service, ingress, policy) and the record goes. A record Redis lost is made
again from the Job.
"""

from __future__ import annotations

from typing import Any

from app.builders import names
from app.models.config import Config
from app.models.workload import WorkloadStatus
from app.storage.kubernetes import KubernetesStorage
from app.workloads.fileserver.builders import SELECTOR, object_name
from app.workloads.fileserver.config import fileserver_config
from app.workloads.fileserver.records import (
    fileserver_json,
    job_finished,
    job_status,
    parse_fileserver,
    record_from_job,
)
from app.workloads.kind import ServiceTracking

GONE = "the file server's Job is gone (deleted outside the service)"


class FileserverTracking(ServiceTracking):
    resource = "jobs"
    selector = SELECTOR

    def __init__(self, config: Config, kube: KubernetesStorage) -> None:
        super().__init__(config, kube)
        self.namespace = fileserver_config(config).namespace

    def owner(self, obj: dict[str, Any]) -> str | None:
        """The user, for their Job (named for them, in the file servers' namespace)."""
        meta = obj.get("metadata") or {}
        username = (meta.get("labels") or {}).get(names.USER_LABEL)
        if not username or meta.get("namespace") != self.namespace:
            return None
        if meta.get("name") != object_name(username):
            return None
        return str(username)

    def ended(self, record: str, pod: dict[str, Any] | None) -> str | None:
        current = parse_fileserver(record)
        if current.status is WorkloadStatus.TERMINATING:
            return None
        if current.status is WorkloadStatus.FAILED:
            return f"the file server could not start: {current.message}"
        if pod is None:
            return GONE
        return job_finished(pod)

    def assess(self, record: str, pod: dict[str, Any] | None) -> str | None:
        """Starting or running, as the Job's pod is ready or not (its end is ``ended``'s)."""
        current = parse_fileserver(record)
        if pod is None or current.status not in (WorkloadStatus.STARTING, WorkloadStatus.RUNNING):
            return None
        status = job_status(pod)
        return None if status is current.status else fileserver_json(current.with_status(status))

    def rebuild(self, pod: dict[str, Any]) -> str | None:
        username = self.owner(pod)
        record = record_from_job(pod, username) if username else None
        return fileserver_json(record) if record is not None else None

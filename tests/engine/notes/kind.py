"""The note kind's declaration: its steps write and delete a ConfigMap, and its tracking
follows the ConfigMaps so the engine's watcher and reconcile keep the records true."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from app.builders import names
from app.engine.kind import Finished, Run
from app.engine.tracking import WorkloadTracking
from app.models.workload import Action, WorkloadRef
from app.workloads.context import WorkloadContext
from app.workloads.kind import ServiceKind
from tests.engine.notes.models import NoteRecord, note_json, parse_note

NOTE_KIND = "note"
OWNER_LABEL = "notes.test/owner"
NAME_LABEL = "notes.test/name"
SELECTOR = f"{NAME_LABEL},{names.MANAGED_BY_LABEL}={names.MANAGED_BY}"
GONE = "the note's ConfigMap is gone"


def note_ref(owner: str, name: str) -> WorkloadRef:
    return WorkloadRef(NOTE_KIND, f"{owner}/{name}")


NAMESPACE = "test-notes"
"""Where every note's ConfigMap is."""


def object_name(owner: str, name: str) -> str:
    return f"note-{owner}-{name}"


def config_map(record: NoteRecord) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": object_name(record.owner, record.name),
            "namespace": record.namespace,
            "labels": {
                OWNER_LABEL: record.owner,
                NAME_LABEL: record.name,
                names.MANAGED_BY_LABEL: names.MANAGED_BY,
            },
        },
        "data": {"text": record.text},
    }


class NoteKind(ServiceKind):
    name = NOTE_KIND
    hold = False
    """Whether its spawns stop for good before they write (a test kills their process)."""

    def track(self, ctx: WorkloadContext) -> NoteTracking:
        return NoteTracking()

    def timeout(self, action: Action) -> float:
        return 30.0

    def spawn(self, run: Run) -> Finished:
        record = parse_note(str((run.operation.spec or {})["record"]))
        run.reporter.info(f"Writing note {record.name}", progress=50)
        if self.hold:
            # A worker that stops here for good: the test kills its process.
            threading.Event().wait()
        self._ctx.kube.apply("configmaps", config_map(record))
        return Finished(note_json(replace(record, status="running")))

    def delete(self, run: Run) -> Finished:
        owner, _, name = run.operation.ref.name.partition("/")
        run.reporter.info(f"Deleting note {name}")
        self._ctx.kube.delete_object("configmaps", NAMESPACE, object_name(owner, name))
        return Finished(None)

    def failed_record(self, run: Run, message: str) -> str | None:
        spec = run.operation.spec or {}
        if "record" in spec:
            record = parse_note(str(spec["record"]))
        else:
            owner, _, name = run.operation.ref.name.partition("/")
            record = NoteRecord(owner, name, NAMESPACE, text="", status="failed")
        return note_json(replace(record, status="failed", error=message))


class NoteTracking(WorkloadTracking):
    resource = "configmaps"
    selector = SELECTOR

    def owner(self, obj: dict[str, Any]) -> str | None:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        owner, name = labels.get(OWNER_LABEL), labels.get(NAME_LABEL)
        return f"{owner}/{name}" if owner and name else None

    def assess(self, record: str, pod: dict[str, Any] | None) -> str | None:
        current = parse_note(record)
        if pod is None and current.status == "running":
            return note_json(replace(current, status="failed", error=GONE))
        return None

    def rebuild(self, pod: dict[str, Any]) -> str | None:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        return note_json(
            NoteRecord(
                owner=labels[OWNER_LABEL],
                name=labels[NAME_LABEL],
                namespace=meta["namespace"],
                text=(pod.get("data") or {}).get("text", ""),
                status="running",
            )
        )

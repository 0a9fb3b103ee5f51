"""The note kind's service: its own check and creation; reads, deletion and events are the
engine's ``WorkloadService``."""

from __future__ import annotations

from dataclasses import replace

from app.engine.engine import Engine
from app.engine.service import RecordCodec, WorkloadService
from app.errors import ConflictError, InvalidRequestError
from app.storage.event_hub import Following
from app.storage.events import EventType
from tests.engine.notes.kind import NAMESPACE, NOTE_KIND, note_ref
from tests.engine.notes.models import NoteRecord, note_json, parse_note

NOTES = RecordCodec(
    kind=NOTE_KIND,
    noun="note",
    parse=parse_note,
    dump=note_json,
    terminating=lambda record: replace(record, status="terminating", error=None),
)


class NoteService(WorkloadService[NoteRecord]):
    def __init__(self, engine: Engine) -> None:
        super().__init__(engine, NOTES, idle_seconds=0.5)

    def create(self, owner: str, name: str, text: str) -> NoteRecord:
        if not name.isalnum():
            raise InvalidRequestError("a note's name is letters and digits", field="name")
        record = NoteRecord(owner, name, NAMESPACE, text, status="starting")
        queued = self._engine.queue_spawn(
            note_ref(owner, name),
            record=note_json(record),
            spec={"record": note_json(record)},
            secret=None,
            first_events=[(EventType.INFO, f"Note {name} requested")],
        )
        if not queued.queued:
            raise ConflictError(f"user {owner} has a note {name} already")
        return record

    def note(self, owner: str, name: str) -> NoteRecord:
        return self.find(note_ref(owner, name), missing=f"user {owner} has no note {name}")

    def notes_of(self, owner: str) -> list[NoteRecord]:
        return self.owned_by(owner)

    def delete(self, owner: str, name: str) -> NoteRecord:
        return self.start_delete(
            note_ref(owner, name),
            missing=f"user {owner} has no note {name}",
            first_events=[(EventType.INFO, f"Deletion of note {name} requested")],
        )

    def events(self, owner: str, name: str, *, after: str) -> Following:
        return self.follow_events(
            note_ref(owner, name), after=after, missing=f"user {owner} has no note {name}"
        )

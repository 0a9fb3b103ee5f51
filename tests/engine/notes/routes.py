"""The note kind's routes: one thin module, as every kind's blueprint."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from flask import Response
from marshmallow import Schema, fields

from app.errors import ConflictError, InvalidRequestError, NotFoundError, RebuildingError
from app.extensions import labs_ext
from app.services.auth import ADMIN, OWNER
from app.web.api import ApiBlueprint, raises
from blueprints.support.auth import requires
from blueprints.support.events import workload_events
from tests.engine.notes.service import NoteService

notes = ApiBlueprint("notes", __name__, url_prefix="/spawner/v1")


class NoteRequestSchema(Schema):
    name = fields.String(required=True)
    text = fields.String(required=True)


def _service() -> NoteService:
    return NoteService(labs_ext.engine)


@notes.post("/labs/<username>/notes")
@raises(InvalidRequestError, ConflictError)
@requires(OWNER, ADMIN)
@notes.arguments(NoteRequestSchema())
def create_note(body: dict[str, Any], username: str) -> tuple[dict[str, Any], int]:
    return asdict(_service().create(username, body["name"], body["text"])), 201


@notes.get("/labs/<username>/notes")
@raises(RebuildingError)
@requires(OWNER, ADMIN)
def list_notes(username: str) -> list[dict[str, Any]]:
    return [asdict(record) for record in _service().notes_of(username)]


@notes.get("/labs/<username>/notes/<name>")
@raises(NotFoundError, RebuildingError)
@requires(OWNER, ADMIN)
def note(username: str, name: str) -> dict[str, Any]:
    return asdict(_service().note(username, name))


@notes.delete("/labs/<username>/notes/<name>")
@raises(NotFoundError)
@requires(OWNER, ADMIN)
def delete_note(username: str, name: str) -> tuple[dict[str, Any], int]:
    return asdict(_service().delete(username, name)), 202


@notes.get("/labs/<username>/notes/<name>/events")
@raises(InvalidRequestError, NotFoundError, RebuildingError)
@requires(OWNER, ADMIN)
def note_events(username: str, name: str) -> Response:
    return workload_events(
        lambda after: _service().events(username, name, after=after), noun="note"
    )

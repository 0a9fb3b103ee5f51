"""A note's record, as the engine stores it and the routes serve it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class NoteRecord:
    owner: str
    name: str
    namespace: str
    text: str
    status: str
    """``starting``, ``running``, ``failed`` or ``terminating``, as every kind's record."""
    error: str | None = None


def note_json(record: NoteRecord) -> str:
    return json.dumps(asdict(record), sort_keys=True)


def parse_note(raw: str) -> NoteRecord:
    return NoteRecord(**json.loads(raw))

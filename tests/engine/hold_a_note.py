"""A service process that queues a note and stops in the middle of writing it, for the test
that kills it (``test_a_kind_in_one_package``). The configuration comes as JSON on stdin."""

from __future__ import annotations

import json
import sys
import threading

from app import create_app
from app.config import parse_config
from app.extensions.labs import machinery_of, start_background
from app.workloads.context import WorkloadContext
from app.workloads.kinds import KINDS
from tests.engine.notes.kind import NoteKind
from tests.engine.notes.service import NoteService


def holding(ctx: WorkloadContext) -> NoteKind:
    return NoteKind(ctx, hold=True)


def main() -> None:
    owner, name = sys.argv[1], sys.argv[2]
    app = create_app(parse_config(json.load(sys.stdin)), kinds=[*KINDS, holding])
    start_background(app)
    with app.app_context():
        NoteService(machinery_of(app).engine).create(owner, name, "written by the survivor")
    threading.Event().wait()


if __name__ == "__main__":
    main()

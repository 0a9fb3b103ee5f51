"""A service process that queues a note and stops in the middle of writing it, for the test
that kills it (``test_a_kind_in_one_package``). The configuration comes as JSON on stdin."""

from __future__ import annotations

import sys

from flask import Flask

from app.extensions.labs import machinery_of
from app.workloads.kinds import KINDS
from tests.engine.notes.kind import NoteKind
from tests.engine.notes.service import NoteService
from tests.support.held_service import hold


class HeldNoteKind(NoteKind):
    hold = True


def main() -> None:
    owner, name = sys.argv[1], sys.argv[2]

    def begin(app: Flask) -> None:
        NoteService(machinery_of(app).engine).create(owner, name, "written by the survivor")

    hold([*KINDS, HeldNoteKind], begin)


if __name__ == "__main__":
    main()

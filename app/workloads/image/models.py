"""An image digest's way into service: the state it is in and how it got there.

No image reaches users before it is validated. Each digest a source lists is recorded, and
moves through these states, each move kept in its history (who, when, why):

- ``discovered``: listed by its source, not yet tried;
- ``pulling``: a validation pod of it is starting, its node pulling it;
- ``validating``: the validation runs on the image under test;
- ``validated``: it passed (or its source is trusted): it may be offered and prepulled;
- ``rejected``: it failed (the reason and the pod's log tail say why), or an administrator
  rejected it: never offered;
- ``retired``: newer validated builds of its class replaced it: no longer offered nor
  prepulled (labs that run it keep running);
- ``deleting``: its record is going.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from app.models.workload import WorkloadStatus


class ImageState(StrEnum):
    DISCOVERED = "discovered"
    PULLING = "pulling"
    VALIDATING = "validating"
    VALIDATED = "validated"
    REJECTED = "rejected"
    RETIRED = "retired"
    DELETING = "deleting"


UNDER_TEST = frozenset({ImageState.PULLING, ImageState.VALIDATING})

MAX_HISTORY = 50
"""Transitions kept with a record; the oldest go first (the first, its discovery, stays)."""


@dataclass(frozen=True)
class Transition:
    """One move of a digest between states."""

    state: ImageState
    at: str
    by: str
    """Who moved it: the refresher, a validation (by its operation), an administrator."""
    why: str


@dataclass(frozen=True)
class ValidationResult:
    """What the last validation of a digest found."""

    passed: bool
    nodes: list[str]
    seconds: float
    reason: str = ""
    exit_code: int | None = None
    log_tail: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ImageRecord:
    """A digest's record: the references it was seen under, its source and its state."""

    digest: str
    source: str
    """The prepull configuration that listed it."""
    references: list[str]
    state: ImageState
    history: list[Transition]
    validation: ValidationResult | None = None
    status: WorkloadStatus = WorkloadStatus.RUNNING
    """The engine's status (``terminating`` while its record is deleted)."""

    def moved(self, state: ImageState, *, at: str, by: str, why: str) -> ImageRecord:
        """This record moved to ``state``, the move kept in its history."""
        history = [*self.history, Transition(state, at, by, why)]
        if len(history) > MAX_HISTORY:
            history = [history[0], *history[-(MAX_HISTORY - 1) :]]
        return replace(self, state=state, history=history)

"""What administrators' actions leave behind: the audit log's entries and maintenance mode."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class AuditEntry:
    """One administrator's action: who did what to what, when, and how it ended.

    ``outcome`` is ``ok`` or the error code the action was answered with; ``detail`` what the
    action said of itself (a maintenance message, how many records it touched), never a
    token.
    """

    at: float
    """Unix time the action ended."""
    actor: str
    action: str
    target: str
    outcome: str
    status: int
    """The HTTP status it was answered with."""
    detail: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> AuditEntry:
        data: dict[str, Any] = json.loads(text)
        return cls(
            at=float(data["at"]),
            actor=str(data["actor"]),
            action=str(data["action"]),
            target=str(data["target"]),
            outcome=str(data["outcome"]),
            status=int(data["status"]),
            detail=str(data.get("detail", "")),
        )


@dataclass(frozen=True)
class Maintenance:
    """Maintenance mode, while it is on: new creations are refused with ``message``."""

    message: str
    since: float
    """Unix time it was turned on."""
    by: str
    """The administrator who turned it on."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Maintenance:
        data: dict[str, Any] = json.loads(text)
        return cls(message=str(data["message"]), since=float(data["since"]), by=str(data["by"]))

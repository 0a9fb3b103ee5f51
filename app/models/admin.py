"""What administrators' actions leave behind: the audit log's entries and maintenance mode."""

from __future__ import annotations

import json
from dataclasses import Field, asdict, dataclass
from typing import Any, ClassVar, Self

from app.models.fields_json import from_fields


class JsonText:
    """A dataclass kept in Redis as one compact JSON text of its fields."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Self:
        data: dict[str, Any] = json.loads(text)
        return from_fields(cls, data)


@dataclass(frozen=True)
class AuditEntry(JsonText):
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


@dataclass(frozen=True)
class Maintenance(JsonText):
    """Maintenance mode, while it is on: new creations are refused with ``message``."""

    message: str
    since: float
    """Unix time it was turned on."""
    by: str
    """The administrator who turned it on."""

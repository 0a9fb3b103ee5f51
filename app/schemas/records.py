"""A kind's record, declared once, as a schema: the text the engine keeps in Redis, the body
its routes serve, its component of the OpenAPI document, and what the Python client's model
is checked against.

A kind's record is a dataclass (its ``models.py``) and its schema (its ``schemas.py``) has
exactly that dataclass's fields. ``RecordText`` pairs them: a record is written as the
schema dumps it and read back through the same schema, which checks it, into the dataclass
again (``app.models.fields_json`` makes each value its field's type).
"""

from __future__ import annotations

import json
from typing import Generic, TypeVar

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from app.models.fields_json import from_fields
from app.models.workload import WorkloadStatus, status_values

R = TypeVar("R")

COMPACT = (",", ":")
"""JSON without spaces: how most kinds' records are kept."""
SPACED = (", ", ": ")
"""JSON's default separators, which apps' and images' records were first kept with: a
record read and written again must be the same text, since the engine's idle writes and
expectations compare texts."""


class RecordText(Generic[R]):
    """How one kind's records are kept as text: the schema's dump with its keys sorted, so
    that an equal record is the same text, read back through the same schema.

    Keys the schema does not name are ignored when a record is read (one written by a newer
    version of the service, with a field more, still reads), as ``app.models.fields_json``
    ignores them; a value the schema refuses makes the text unreadable (``ValueError``).
    """

    def __init__(
        self,
        record: type[R],
        schema: type[Schema],
        *,
        separators: tuple[str, str] = COMPACT,
        exclude: frozenset[str] = frozenset(),
    ) -> None:
        """``exclude``: fields the text leaves out, which take their defaults when it is
        read."""
        self.record = record
        """The dataclass."""
        self.schema = schema
        """Its schema: the record's fields, each as the routes and the document show it."""
        self._schema = schema(exclude=exclude)
        self._separators = separators

    def dump(self, record: R) -> str:
        """``record``'s text."""
        return json.dumps(self._schema.dump(record), sort_keys=True, separators=self._separators)

    def parse(self, text: str) -> R:
        """The record ``text`` is; ``ValueError`` when it is not JSON, or not a record of
        this kind."""
        try:
            data = self._schema.load(json.loads(text), unknown=EXCLUDE)
        except ValidationError as error:
            raise ValueError(f"not a {self.record.__name__}: {error.messages}") from None
        return from_fields(self.record, data)


def status_field(*statuses: WorkloadStatus, description: str | None = None) -> fields.String:
    """A record's ``status``: the engine's statuses the kind's records take."""
    metadata = {"description": description} if description else {}
    return fields.String(
        required=True, validate=validate.OneOf(status_values(*statuses)), metadata=metadata
    )


class UsageSchema(Schema):
    """What a workload holds against its owner's budget."""

    clusters = fields.Integer(required=True)
    workers = fields.Integer(required=True)
    kernels = fields.Integer(load_default=0, dump_default=0)
    cpu = fields.Float(required=True, metadata={"description": "Cores its pods request."})
    memory = fields.Integer(required=True, metadata={"description": "Bytes its pods request."})
    gpus = fields.Integer(required=True)


def usage_field() -> fields.Nested:
    """A ``BudgetedRecord``'s (``app.models.usage``) ``usage``: what a workload counted
    against its owner's budget holds. A field rather than a base schema, so that each kind's
    record keeps its fields in the order its routes have always shown them."""
    return fields.Nested(UsageSchema, required=True, metadata={"description": "What it holds."})


def error_field() -> fields.String:
    """A ``BudgetedRecord``'s ``error``: why the workload failed."""
    return fields.String(allow_none=True, metadata={"description": "Why it failed."})

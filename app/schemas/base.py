"""Base schemas: how keys are named on the wire, once for every schema."""

from __future__ import annotations

from marshmallow import RAISE, Schema
from marshmallow.fields import Field


def camel_case(name: str) -> str:
    """``spawn_timeout`` → ``spawnTimeout``: the key of a snake_case attribute."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class CamelCaseSchema(Schema):
    """Keys are camelCase (as in the Helm values they are rendered from), attributes
    snake_case: every field's key is made from its name, so no key is written twice."""

    def on_bind_field(self, field_name: str, field_obj: Field) -> None:
        field_obj.data_key = camel_case(field_obj.data_key or field_name)


class StrictCamelCaseSchema(CamelCaseSchema):
    """A camelCase schema where unknown keys are errors, not silently dropped."""

    class Meta:
        unknown = RAISE

"""What every configuration section's schema is built from, wherever the section lives
(``app.config.schema``, a kind's ``config.py``): camelCase keys, unknown keys refused, the
validators several sections share, fields for Kubernetes quantities (cores and bytes, as
numbers or as Kubernetes writes them), and how a kind declares the sections it owns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, TypeVar

from marshmallow import RAISE, Schema, ValidationError, fields, validate
from marshmallow.fields import Field

from app.quantities import parse_cpu, parse_memory

POSITIVE = validate.Range(min=0, min_inclusive=False)
ENV_NAME = validate.Regexp(
    r"^[A-Za-z_][A-Za-z0-9_]*$", error="must be an environment variable name"
)
ABSOLUTE_PATH = validate.Regexp(r"^/", error="must be an absolute path")
DNS_LABEL = validate.Regexp(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    error="must be a DNS label: lowercase letters, digits and '-'",
)

ConfigSections = Mapping[str, Field]
"""The top-level keys of the configuration a kind owns (``SECTIONS`` in its package's
``config.py``), each with the field that loads it; the key is the attribute of
``app.models.config.Config`` it fills. The root schema (``app.config.schema``) is composed of
every kind's, listed in ``app.workloads.config_sections``, and the sections of its own."""

Q = TypeVar("Q", int, float)


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


class _PositiveQuantityField(fields.Field[Q], ABC):
    """A Kubernetes quantity above 0, as a number or as Kubernetes writes it; a subclass
    says how it is read (``_parse``) and what the error shows (``_examples``)."""

    _examples: str

    @abstractmethod
    def _parse(self, value: Any) -> Q:
        """The quantity ``value`` writes; ``ValueError`` or ``TypeError`` if it is none."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Q:
        try:
            amount = self._parse(value)
        except (ValueError, TypeError):
            raise ValidationError(self._examples) from None
        if amount <= 0:
            raise ValidationError("must be greater than 0")
        return amount


class CpuField(_PositiveQuantityField[float]):
    """CPU cores, as a number or a Kubernetes quantity (``500m``)."""

    _examples = "not a CPU quantity (examples: 2, 0.5, 500m)"

    def _parse(self, value: Any) -> float:
        return parse_cpu(value)


class MemoryField(_PositiveQuantityField[int]):
    """Memory in bytes, as a number or a Kubernetes quantity (``4Gi``)."""

    _examples = "not a memory quantity (examples: 4Gi, 512Mi)"

    def _parse(self, value: Any) -> int:
        return parse_memory(value)

"""What every configuration section's schema is built from, wherever the section lives
(``app.config.schema``, a kind's ``config.py``): camelCase keys, unknown keys refused, the one
way a section becomes its typed object, the validators and fields several sections share
(Kubernetes quantities, cores and bytes, as numbers or as Kubernetes writes them; a variable's
environment), and how a kind declares the sections it owns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar

from marshmallow import (
    RAISE,
    Schema,
    ValidationError,
    fields,
    post_load,
    validate,
    validates_schema,
)
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

SectionCheck = Callable[[Mapping[str, Any]], None]
"""A rule between a kind's section and the others: given every loaded section by attribute,
it raises ``ValidationError`` at the key it is about (``CHECKS`` in a kind's ``config.py``)."""

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


class ConfigModelSchema(StrictCamelCaseSchema):
    """A section (or a part of one) that loads into its ``model``, a frozen dataclass of
    ``app.models.config``, built by keyword from the loaded values: each field's attribute
    names a field of the model (``attribute=`` where the key says it otherwise), and every
    list is held as a tuple, as every list of the frozen configuration is. A schema whose
    object is not simply what it loads (a default worked out from other keys, keys folded
    into one) says how in ``_values``."""

    model: ClassVar[type[Any]]

    def _values(self, data: dict[str, Any]) -> dict[str, Any]:
        """The model's fields from the loaded ``data``: by default, as loaded."""
        return data

    @post_load
    def _build(self, data: dict[str, Any], **_: Any) -> Any:
        values = self._values(data)
        return self.model(
            **{key: tuple(v) if isinstance(v, list) else v for key, v in values.items()}
        )


class GroupSettingsSchema(ConfigModelSchema):
    """A group's own settings, listed beside everyone's default: the keys of the settings'
    schema and the group's name. A subclass extends both, this one first (``class
    GroupBudgetSchema(GroupSettingsSchema, BudgetSchema)``): the settings are built as their
    schema builds them, then held with the name in the subclass's ``group_model``."""

    group = fields.String(required=True, validate=validate.Length(min=1))
    group_model: ClassVar[type[Any]]
    """The group's object, made of the group's name and the settings' object."""

    @post_load
    def _build(self, data: dict[str, Any], **kwargs: Any) -> Any:
        group = data.pop("group")
        return self.group_model(group, super()._build(data, **kwargs))


class SourceTypedSchema(ConfigModelSchema):
    """A section whose ``type`` says which of its other keys must be given (a volume's
    source): ``sources`` maps each type to those keys' attributes."""

    sources: ClassVar[Mapping[str, tuple[str, ...]]]

    @validates_schema
    def _source_fields(self, data: dict[str, Any], **_: Any) -> None:
        for needed in self.sources.get(data.get("type", ""), ()):
            if not data.get(needed):
                raise ValidationError(f"required for type {data['type']}", camel_case(needed))


def refuse_duplicates(names: Iterable[str], what: str, key: str | None = None) -> None:
    """Refuse a list whose items share a name: the error, at ``key`` (or the field being
    validated), lists each name given more than once as ``duplicate <what>: a, b``."""
    given = list(names)
    duplicates = sorted({name for name in given if given.count(name) > 1})
    if not duplicates:
        return
    message = f"duplicate {what}: {', '.join(duplicates)}"
    if key is None:
        raise ValidationError(message)
    raise ValidationError(message, key)


def environment_field(**kwargs: Any) -> fields.Dict:
    """Variables a container gets: names that are environment variable names, string values,
    none by default."""
    return fields.Dict(
        keys=fields.String(validate=ENV_NAME), values=fields.String(), load_default=dict, **kwargs
    )


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

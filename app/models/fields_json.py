"""Dataclasses read back from the JSON objects they were written as (their fields, as
``dataclasses.asdict`` gives them).

One rule instead of a constructor call spelled out per class: each value is made its
field's type again (a string its enum, a number ``int`` or ``float``, an array a tuple or a
list, an object a dict or the dataclass it was), and a field the object lacks takes its
default. Keys that name no field are ignored, so a record written with a field more still
reads.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields, is_dataclass
from enum import Enum
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

T = TypeVar("T")

Convert = Callable[[Any], Any]


def from_fields(cls: type[T], data: Mapping[str, Any]) -> T:
    """``cls``, a dataclass, from ``data``. Raises ``KeyError`` for a field without a
    default that ``data`` lacks, ``ValueError`` or ``TypeError`` for a value that is not
    of its field's type."""
    values: dict[str, Any] = {}
    for name, convert, required in _fields_of(cls):
        if name in data:
            values[name] = convert(data[name])
        elif required:
            raise KeyError(name)
    return cls(**values)


_FIELDS: dict[type, tuple[tuple[str, Convert, bool], ...]] = {}
"""Each class's fields as ``from_fields`` reads them, worked out once."""


def _fields_of(cls: type) -> tuple[tuple[str, Convert, bool], ...]:
    """Each field set through the constructor: its name, how its value is made its type,
    and whether it has no default."""
    known = _FIELDS.get(cls)
    if known is None:
        hints = get_type_hints(cls)
        known = _FIELDS[cls] = tuple(
            (
                f.name,
                _converter(hints[f.name]),
                f.default is MISSING and f.default_factory is MISSING,
            )
            for f in fields(cls)
            if f.init
        )
    return known


def _converter(hint: Any) -> Convert:
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        present = [arg for arg in args if arg is not type(None)]
        if len(present) != 1:
            return _as_is
        inner = _converter(present[0])
        return lambda value: None if value is None else inner(value)
    if origin is tuple:
        # ``tuple[X, ...]``; a tuple of fixed places keeps its values as they are.
        item = _converter(args[0]) if len(args) == 2 and args[1] is Ellipsis else _as_is
        return lambda value: tuple(item(v) for v in value)
    if origin is list:
        item = _converter(args[0]) if args else _as_is
        return lambda value: [item(v) for v in value]
    if origin is dict:
        key, item = (_converter(arg) for arg in args) if args else (_as_is, _as_is)
        return lambda value: {key(k): item(v) for k, v in dict(value).items()}
    if is_dataclass(hint) and isinstance(hint, type):
        return lambda value: from_fields(hint, value)
    if hint in (str, int, float, bool) or (isinstance(hint, type) and issubclass(hint, Enum)):
        return hint
    return _as_is


def _as_is(value: Any) -> Any:
    return value

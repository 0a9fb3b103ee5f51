"""Tables of custom resources: the name, then the columns their CRD declares.

A CRD version's ``additionalPrinterColumns`` name a JSONPath each; the server reads it from
the object and renders the value by the column's type: ``date`` as an age, ``integer`` and
``number`` as numbers, ``boolean`` as itself, ``string`` as text (numbers and structures
written out). A missing value is an empty (null) cell, and a version that declares no columns
gets one, ``Age``. Paths are the simple kind CRDs use: fields, ``[n]`` indexes and quoted
keys (``.metadata.annotations['a.b/c']``); anything else yields empty cells.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

from devstack.kube.resources import PrinterColumn, ResourceType

from .ages import UNKNOWN, human_duration, parse_time
from .columns import NAME, Column, JsonObject, Printer, text

_DEFAULT_COLUMNS = (
    PrinterColumn("Age", "date", ".metadata.creationTimestamp", "When the object was created."),
)
_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")
_MISSING = object()


def custom_printer(resource: ResourceType) -> Printer:
    declared = resource.printer_columns or _DEFAULT_COLUMNS
    columns = tuple(
        Column(
            c.name,
            c.type,
            c.description or f"The value at {c.json_path}.",
            c.format,
            c.priority,
        )
        for c in declared
    )

    def cells(obj: JsonObject, now: float) -> list[Any]:
        row: list[Any] = [text(obj, "metadata", "name")]
        for column in declared:
            value = lookup(obj, column.json_path)
            row.append(None if value is _MISSING else render(column.type, value, now))
        return row

    return Printer((NAME, *columns), cells)


def lookup(obj: Any, path: str) -> Any:
    """The value at a simple JSONPath (``.a.b[0]``, braces optional), or ``_MISSING``."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1].strip()
    position, value = 0, obj
    while position < len(path):
        step = _STEP.match(path, position)
        if step is None:
            return _MISSING
        position = step.end()
        field, index = step.group(1, 2)
        key = field if field is not None else step.group(3) or step.group(4) or ""
        if index is not None:
            if not isinstance(value, list) or int(index) >= len(value):
                return _MISSING
            value = value[int(index)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            return _MISSING
    return value


def render(kind: str, value: Any, now: float) -> Any:
    """A cell of a column of type ``kind`` from the value found; None where the value is not
    of the column's type."""
    if value is None:
        return None
    if kind == "string":
        return _as_text(value)
    if kind == "integer" and not isinstance(value, bool) and isinstance(value, int | float):
        return int(value)
    if kind == "number" and not isinstance(value, bool) and isinstance(value, int | float):
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        moment = parse_time(value)
        if moment is None:
            return "<invalid>" if value else UNKNOWN
        return human_duration(now - moment.timestamp())
    return None


def _as_text(value: Any) -> str:
    """A value written out as the server's JSONPath printer writes it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _shortest(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _shortest(value: float) -> str:
    """A float in its shortest exact digits, in exponent form from 1e+06 up or below 1e-04."""
    if not math.isfinite(value):
        return str(value)  # JSON has none; a value set in the emulator's own store might
    number = Decimal(repr(value)).normalize()
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    magnitude = len(digits) + exponent - 1
    if -4 <= magnitude < 6:
        return format(number, "f")
    mantissa = "".join(str(d) for d in digits)
    mantissa = mantissa[0] + ("." + mantissa[1:] if len(mantissa) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{'-' if magnitude < 0 else '+'}{abs(magnitude):02d}"

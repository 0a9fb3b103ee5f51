"""What a table of one kind is made of: its columns and the function that fills a row.

Shared by the built-in kinds' printers and the custom resources' ones, with the few cell
formats several kinds use (a label map, a label selector, a pod template's containers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Column:
    """One ``TableColumnDefinition``; ``priority`` 1 columns show only with ``-o wide``."""

    name: str
    type: str = "string"
    description: str = ""
    format: str = ""
    priority: int = 0

    def definition(self) -> JsonObject:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


Cells = Callable[[JsonObject, float], list[Any]]
"""A row's cells from an object and the time (seconds since the epoch) its ages are taken at."""


@dataclass(frozen=True)
class Printer:
    """How the server prints one kind: the columns, and a row's cells in their order
    (every column's, the wide ones included: the client drops those it does not show)."""

    columns: tuple[Column, ...]
    cells: Cells
    conditions: Callable[[JsonObject], list[JsonObject]] | None = None
    """The row's ``conditions`` (a finished pod's ``Completed``), if the kind has any."""


NAME = Column("Name", format="name", description="The object's name, unique in its namespace.")
AGE = Column("Age", description="How long ago the object was created.")
CONTAINERS = Column("Containers", priority=1, description="The pod template's containers.")
IMAGES = Column("Images", priority=1, description="The image of each of those containers.")
SELECTOR = Column("Selector", priority=1, description="The label selector of its pods.")


def field(obj: Mapping[str, Any], *path: str) -> Any:
    """The value at ``path`` in nested mappings, or None where any step is missing."""
    value: Any = obj
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def items(obj: Mapping[str, Any], *path: str) -> list[Any]:
    """The list at ``path``, or an empty one."""
    value = field(obj, *path)
    return value if isinstance(value, list) else []


def mapping(obj: Mapping[str, Any], *path: str) -> dict[str, Any]:
    """The mapping at ``path``, or an empty one."""
    value = field(obj, *path)
    return value if isinstance(value, dict) else {}


def number(obj: Mapping[str, Any], *path: str, default: int = 0) -> int:
    """The integer at ``path``; absent counters are zero, as the API omits them."""
    value = field(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def text(obj: Mapping[str, Any], *path: str) -> str:
    value = field(obj, *path)
    return value if isinstance(value, str) else ""


def format_labels(labels: Mapping[str, Any]) -> str:
    """``a=1,b=2`` by key, or ``<none>``."""
    return ",".join(f"{key}={labels[key]}" for key in sorted(labels)) or "<none>"


def format_selector(selector: Any) -> str:
    """A ``LabelSelector`` in the selector syntax (``app=x,tier in (a,b)``), requirements by
    key; the empty string for an empty or absent one."""
    if not isinstance(selector, dict):
        return ""
    requirements: list[tuple[str, str]] = [
        (str(key), f"{key}={value}") for key, value in mapping(selector, "matchLabels").items()
    ]
    for expression in items(selector, "matchExpressions"):
        key = str(expression.get("key", ""))
        operator = expression.get("operator")
        values = ",".join(sorted(str(v) for v in expression.get("values") or []))
        if operator == "In":
            requirements.append((key, f"{key} in ({values})"))
        elif operator == "NotIn":
            requirements.append((key, f"{key} notin ({values})"))
        elif operator == "Exists":
            requirements.append((key, key))
        elif operator == "DoesNotExist":
            requirements.append((key, f"!{key}"))
    return ",".join(rendered for _, rendered in sorted(requirements, key=lambda r: r[0]))


def format_selector_or_none(selector: Any) -> str:
    """As :func:`format_selector`, ``<none>`` when it selects by nothing."""
    return format_selector(selector) or "<none>"


def template_containers(obj: Mapping[str, Any]) -> list[str]:
    """The wide cells of a kind with a pod template: its containers' names, then images."""
    containers = items(obj, "spec", "template", "spec", "containers")
    return [
        ",".join(text(c, "name") for c in containers),
        ",".join(text(c, "image") for c in containers),
    ]

"""Label and field selectors, parsed once per request and matched against plain dicts.

Syntax follows the API server: label selectors take ``=``, ``==``, ``!=``, ``in (...)``,
``notin (...)``, ``key`` (exists) and ``!key``; field selectors take ``=``, ``==`` and ``!=``
on dotted paths such as ``metadata.name`` or ``spec.nodeName``. A malformed selector is a
400, as on a real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devstack.kube import errors

Predicate = Callable[[dict[str, Any]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s*\((.*)\)\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")
_FIELD_RE = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside an ``in (...)`` value list."""
    terms: list[str] = []
    depth = 0
    current: list[str] = []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


@dataclass(frozen=True)
class _Requirement:
    key: str
    operator: str
    values: frozenset[str]

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "exists":
            return present
        if self.operator == "!exists":
            return not present
        if self.operator in ("=", "==", "in"):
            return present and value in self.values
        # "!=" and "notin" also match objects without the label, as upstream.
        return not present or value not in self.values


def parse_label_selector(selector: str | None) -> Predicate:
    """A predicate over objects for a ``labelSelector`` query value."""
    if not selector or not selector.strip():
        return _always
    requirements = [_parse_label_term(term) for term in _split_terms(selector)]

    def matches(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in requirements)

    return matches


def _parse_label_term(term: str) -> _Requirement:
    if match := _SET_RE.match(term):
        negated, key, operator, raw_values = match.groups()
        if negated:
            raise errors.bad_request(f"unable to parse requirement: {term.strip()!r}")
        values = frozenset(v.strip() for v in raw_values.split(",") if v.strip())
        return _Requirement(key, operator, values)
    if match := _EQ_RE.match(term):
        key, operator, value = match.groups()
        return _Requirement(key, operator, frozenset({value}))
    if match := _EXISTS_RE.match(term):
        negated, key = match.groups()
        return _Requirement(key, "!exists" if negated else "exists", frozenset())
    raise errors.bad_request(f"unable to parse requirement: {term.strip()!r}")


def field_value(obj: dict[str, Any], path: str) -> str:
    """The string form of a dotted field, as field selectors compare it ("" when absent)."""
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(selector: str | None) -> Predicate:
    """A predicate over objects for a ``fieldSelector`` query value."""
    if not selector or not selector.strip():
        return _always
    terms: list[tuple[str, bool, str]] = []
    for term in _split_terms(selector):
        match = _FIELD_RE.match(term)
        if match is None:
            raise errors.bad_request(f"invalid field selector: {term.strip()!r}")
        path, operator, value = match.groups()
        terms.append((path, operator != "!=", value))

    def matches(obj: dict[str, Any]) -> bool:
        return all((field_value(obj, path) == value) is equal for path, equal, value in terms)

    return matches


def _always(obj: dict[str, Any]) -> bool:
    return True


def combine(*predicates: Predicate) -> Predicate:
    """One predicate true when all are; skips the no-op ones so the common case is cheap."""
    active = [p for p in predicates if p is not _always]
    if not active:
        return _always
    if len(active) == 1:
        return active[0]
    return lambda obj: all(p(obj) for p in active)


def label_selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Whether ``labels`` satisfy a ``LabelSelector`` object (``matchLabels`` and
    ``matchExpressions``), as workload controllers pick their pods and ReplicaSets.

    A missing selector selects nothing and an empty one everything, as
    ``metav1.LabelSelectorAsSelector`` reads them; an unknown operator selects nothing.
    """
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key = str(expression.get("key") or "")
        values = [str(v) for v in expression.get("values") or []]
        operator = expression.get("operator")
        present = key in labels
        if operator == "In":
            matched = present and labels[key] in values
        elif operator == "NotIn":
            matched = not present or labels[key] not in values
        elif operator == "Exists":
            matched = present
        elif operator == "DoesNotExist":
            matched = not present
        else:
            matched = False
        if not matched:
            return False
    return True

"""Kubernetes resource quantities (``100m``, ``1Gi``, ``2e3``) as exact decimals.

The schemas accept any string for a quantity, so the API server's own parser decides what
is valid; this mirrors its grammar: a signed decimal number followed by a binary suffix
(``Ki`` .. ``Ei``), a decimal suffix (``n``, ``u``, ``m``, ``k``, ``M`` .. ``E``) or a
decimal exponent (``e3``, ``E-2``).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_QUANTITY_RE = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)

_MULTIPLIERS: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


class QuantityError(ValueError):
    """The text is not a quantity."""


def parse_quantity(value: str | int | float) -> Decimal:
    """The quantity's value in base units (cores, bytes); raises :class:`QuantityError`."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY_RE.match(value.strip()) if isinstance(value, str) else None
    if match is None or value != value.strip():
        raise QuantityError(
            "quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    try:
        number = Decimal(match.group("number"))
    except InvalidOperation as exc:
        raise QuantityError(f"invalid number in quantity {value!r}") from exc
    suffix = match.group("suffix") or ""
    if suffix[:1] in ("e", "E") and suffix not in _MULTIPLIERS:
        return number.scaleb(int(suffix[1:]))
    return number * _MULTIPLIERS[suffix]

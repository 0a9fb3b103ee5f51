"""Kubernetes resource quantities ("500m", "2Gi") as plain numbers for the scheduler."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

_SUFFIXES: dict[str, Decimal] = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


def parse_quantity(value: object) -> Decimal:
    """The quantity in base units (cores, bytes); malformed values count as zero.

    The API layer validates quantities; the scheduler only needs a number to compare.
    """
    if isinstance(value, int | float):
        return Decimal(str(value))
    text = str(value).strip()
    for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"):
        if text.endswith(suffix):
            number, multiplier = text[: -len(suffix)], _SUFFIXES[suffix]
            break
    else:
        number, multiplier = text, Decimal(1)
    try:
        return Decimal(number) * multiplier
    except InvalidOperation:
        return Decimal(0)


def milli(value: object) -> int:
    """CPU quantity in millicores."""
    return int(parse_quantity(value) * 1000)


def whole(value: object) -> int:
    """Memory (or count) quantity in base units."""
    return int(parse_quantity(value))

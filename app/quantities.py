"""Kubernetes resource quantities: parse the strings operators write, format what we send."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


def parse_quantity(value: str | int | float) -> Decimal:
    """A quantity as a number of base units (bytes, cores). Raises ``ValueError``."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"not a quantity: {value!r}") from None
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    return base * _DECIMAL[suffix]


def parse_memory(value: str | int | float) -> int:
    """Memory in bytes (rounded up, as the kubelet does)."""
    amount = parse_quantity(value)
    if amount < 0:
        raise ValueError(f"memory cannot be negative: {value!r}")
    return int(amount.to_integral_value(rounding="ROUND_CEILING"))


def parse_cpu(value: str | int | float) -> float:
    """CPU in cores."""
    amount = parse_quantity(value)
    if amount < 0:
        raise ValueError(f"CPU cannot be negative: {value!r}")
    return float(amount)


def format_cpu(cores: float) -> str:
    """Cores as the millicore string Kubernetes prints (``250m``, ``2``)."""
    millis = round(cores * 1000)
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_memory(size: int) -> str:
    """Bytes as an exact quantity string (``4Gi`` when it divides, else bytes)."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if size >= unit and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)

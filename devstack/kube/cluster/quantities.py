"""Kubernetes resource quantities ("500m", "2Gi") as plain numbers for the scheduler."""

from __future__ import annotations

from decimal import Decimal

from devstack.kube.quantities import QuantityError
from devstack.kube.quantities import parse_quantity as parse_strict


def parse_quantity(value: object) -> Decimal:
    """The quantity in base units (cores, bytes); malformed values count as zero.

    The API layer validates quantities; the scheduler only needs a number to compare.
    """
    try:
        return parse_strict(value)  # type: ignore[arg-type]
    except (QuantityError, TypeError):
        return Decimal(0)


def milli(value: object) -> int:
    """CPU quantity in millicores."""
    return int(parse_quantity(value) * 1000)


def whole(value: object) -> int:
    """Memory (or count) quantity in base units."""
    return int(parse_quantity(value))

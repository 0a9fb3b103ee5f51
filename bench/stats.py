"""Percentiles and summaries, in milliseconds where times are concerned."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1) of a non-empty sequence."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def summary_ms(seconds: Sequence[float]) -> dict[str, float | int]:
    """Count, p50, p95, p99, min, max and mean of durations given in seconds."""
    if not seconds:
        return {"count": 0}
    return {
        "count": len(seconds),
        "p50_ms": ms(percentile(seconds, 0.50)),
        "p95_ms": ms(percentile(seconds, 0.95)),
        "p99_ms": ms(percentile(seconds, 0.99)),
        "min_ms": ms(min(seconds)),
        "max_ms": ms(max(seconds)),
        "mean_ms": ms(sum(seconds) / len(seconds)),
    }


def median(values: Sequence[float]) -> float:
    return percentile(values, 0.5)

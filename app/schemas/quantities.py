"""Configuration fields for Kubernetes quantities: cores and bytes, as numbers or as
Kubernetes writes them."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields

from app.quantities import parse_cpu, parse_memory


class CpuField(fields.Field):
    """CPU cores, as a number or a Kubernetes quantity (``500m``)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        try:
            cores = parse_cpu(value)
        except (ValueError, TypeError):
            raise ValidationError("not a CPU quantity (examples: 2, 0.5, 500m)") from None
        if cores <= 0:
            raise ValidationError("must be greater than 0")
        return cores


class MemoryField(fields.Field):
    """Memory in bytes, as a number or a Kubernetes quantity (``4Gi``)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        try:
            size = parse_memory(value)
        except (ValueError, TypeError):
            raise ValidationError("not a memory quantity (examples: 4Gi, 512Mi)") from None
        if size <= 0:
            raise ValidationError("must be greater than 0")
        return size

"""The Namespace ``<prefix>-<user>`` that holds everything of a user's lab.

Deleting it removes every other lab object at once. It carries the spec annotation too, so a lab
whose pod is gone (or not yet created) can still be described from Kubernetes alone.
"""

from __future__ import annotations

from typing import Any

from app.builders import names
from app.builders.metadata import object_meta
from app.builders.record import spec_annotation
from app.models.lab import LabSpec


def build_namespace(spec: LabSpec, namespace: str) -> dict[str, Any]:
    """The Namespace; no component label, as it will also hold the lab's Dask pools."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": object_meta(
            namespace,
            spec.username,
            namespace=None,
            component=None,
            annotations={names.SPEC_ANNOTATION: spec_annotation(spec)},
        ),
    }

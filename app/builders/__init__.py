"""Builders: pure functions from a lab spec and the configuration to Kubernetes objects.

No I/O happens here; objects are plain dicts in the JSON shape the Kubernetes API accepts.
"""

from app.builders.lab import (
    LabObjects,
    build_lab,
    group_file,
    internal_url,
    lab_env,
    passwd_file,
    quotas,
)
from app.builders.names import lab_namespace, object_name

__all__ = [
    "LabObjects",
    "build_lab",
    "group_file",
    "internal_url",
    "lab_env",
    "lab_namespace",
    "object_name",
    "passwd_file",
    "quotas",
]

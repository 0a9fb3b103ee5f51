"""The CustomResourceDefinitions of the operators a platform runs beside the service.

Written from each operator's published CRD (see the comment atop each file); the emulator's
simulated operators (``devstack.kube.cluster.operators``) reconcile their objects. A cluster
administrator installs the real ones; the local stack and the tests install these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent

OPERATOR_CRDS = ("daskclusters", "rayclusters", "sparkconnects", "gafaelfawringresses")
"""Every CRD file here, by plural."""


def crd(plural: str) -> dict[str, Any]:
    """The CustomResourceDefinition of ``plural``, as a fresh object."""
    loaded: dict[str, Any] = yaml.safe_load((HERE / f"{plural}.yaml").read_text(encoding="utf-8"))
    return loaded

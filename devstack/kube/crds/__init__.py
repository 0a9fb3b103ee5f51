"""The CustomResourceDefinitions of the operators a platform runs beside the service.

The Dask operator's are read from the installed ``dask-kubernetes`` package, whose Helm chart
ships them; the real operator runs on the local stack (``devstack.dask_operator``). The others
are written here from each operator's published CRD (see the comment atop each file), and the
emulator's simulated operators (``devstack.kube.cluster.operators``) reconcile their objects.
A cluster administrator installs the real ones; the local stack and the tests install these.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent

DASK_CRDS = {
    "daskclusters": "daskcluster.yaml",
    "daskworkergroups": "daskworkergroup.yaml",
    "daskjobs": "daskjob.yaml",
    "daskautoscalers": "daskautoscaler.yaml",
}
"""The Dask operator's CRDs, by plural: the files of its Helm chart's ``crds`` folder."""
_DASK_CHART_CRDS = ("operator", "deployment", "helm", "dask-kubernetes-operator", "crds")

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""PyYAML's safe loader on libyaml when the installed PyYAML was built with it."""

OPERATOR_CRDS = (*DASK_CRDS, "rayclusters", "sparkconnects", "gafaelfawringresses")
"""Every operator CRD the platform installs, by plural."""


def crd(plural: str) -> dict[str, Any]:
    """The CustomResourceDefinition of ``plural``, as a fresh object."""
    if plural in DASK_CRDS:
        text = (
            resources.files("dask_kubernetes")
            .joinpath(*_DASK_CHART_CRDS, DASK_CRDS[plural])
            .read_text(encoding="utf-8")
        )
    else:
        text = (HERE / f"{plural}.yaml").read_text(encoding="utf-8")
    # libyaml's parser: the Dask CRDs' schemas took PyYAML's own 1.2 s at every stack's start.
    loaded: dict[str, Any] = yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader
    return loaded

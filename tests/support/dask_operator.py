"""The real dask-kubernetes operator against a test's emulator."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from devstack.dask_operator import DaskOperatorProcess
from devstack.kube import KubernetesEmulator
from devstack.kube.crds import DASK_CRDS, crd


@contextmanager
def dask_operator_for(kube: KubernetesEmulator, folder: Path) -> Iterator[DaskOperatorProcess]:
    """The operator running against ``kube`` while the block runs, its CRDs installed first
    (as the cluster's administrator installs them); its kubeconfig and log in ``folder``."""
    for plural in DASK_CRDS:
        name = crd(plural)["metadata"]["name"]
        if kube.store.get("customresourcedefinitions", None, name) is None:
            kube.store.create("customresourcedefinitions", crd(plural))
    kubeconfig = folder / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(kube.kubeconfig()), encoding="utf-8")
    operator = DaskOperatorProcess(
        kubeconfig, folder / "dask-operator.log", kube.cluster.dns.environment()
    ).start()
    try:
        yield operator
    finally:
        operator.stop()

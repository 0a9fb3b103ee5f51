"""The kinds of workload this service runs: the one list the engine is built from.

Each entry builds a kind's declaration (``app.engine.kind.WorkloadKind``) from the
process's ``WorkloadContext``. Adding a kind is its package under ``app/workloads/`` and
one line here (and its routes' blueprint in the factory, and its configuration section, if it
has one, in ``app.workloads.config_sections``).
"""

from __future__ import annotations

from app.workloads.app.kind import AppKind
from app.workloads.cluster.kind import ClusterKind
from app.workloads.fileserver.kind import FileserverKind
from app.workloads.image.kind import ImageKind
from app.workloads.kernel.kind import KernelKind
from app.workloads.kind import ServiceKind
from app.workloads.lab.kind import LabKind

KindFactory = type[ServiceKind]
"""A kind's declaration, built for a process from its ``WorkloadContext``; what it
declares of itself as a class (its budget) is read before."""

KINDS: tuple[KindFactory, ...] = (
    LabKind,
    ClusterKind,
    KernelKind,
    AppKind,
    ImageKind,
    FileserverKind,
)

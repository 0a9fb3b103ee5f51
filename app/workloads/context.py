"""What every kind's steps and services work with, gathered once per process.

Operations run outside any Flask request (in worker threads, or greenlets under gevent), so
they get their collaborators from this object rather than from ``current_app``. It lives
with the kinds, below the services that also use it, and holds nothing above them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.engine.feeds import WatchFeeds
from app.models.config import Config
from app.storage.images import ImageStore
from app.storage.kubernetes import CustomKind, KubernetesStorage
from app.storage.prepull import PrepullStore
from app.storage.registries import RegistryDirectory
from app.workloads.budgeted import Budgeted
from app.workloads.image.service import ImageService
from app.workloads.lab.store import LabStore


@dataclass(frozen=True)
class WorkloadContext:
    """The configuration, the stores and the clients a kind's work needs."""

    config: Config
    labs: LabStore
    kube: KubernetesStorage
    feeds: WatchFeeds
    """The shared watches operations follow their objects on (``app.engine.feeds``)."""
    images: ImageService
    registries: RegistryDirectory
    prepulls: PrepullStore
    image_store: ImageStore
    """The image lists as listed and as offered (validations publish what they decide)."""
    budgeted: tuple[Budgeted, ...]
    """The kinds whose workloads count against their owner's budget (``ServiceKind.budget``)."""
    operator_objects: Mapping[str, tuple[CustomKind, ...]] = field(default_factory=dict)
    """The custom resources operators hold in lab namespaces, by the kind of workload they
    are of (``ServiceKind.operator_objects``)."""

"""What background work needs, gathered once per process.

Operations run outside any Flask request (in worker threads, or greenlets under gevent), so
they get their collaborators from this object rather than from ``current_app``.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.config import Config
from app.services.images import ImageService
from app.services.registries import RegistryDirectory
from app.storage.images import ImageStore
from app.storage.kubernetes import KubernetesStorage
from app.storage.labs import LabStore
from app.storage.prepull import PrepullStore


@dataclass(frozen=True)
class LabContext:
    config: Config
    labs: LabStore
    kube: KubernetesStorage
    images: ImageService
    registries: RegistryDirectory
    prepulls: PrepullStore
    image_store: ImageStore
    """The image lists as listed and as offered (validations publish what they decide)."""

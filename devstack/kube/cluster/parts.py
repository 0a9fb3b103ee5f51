"""What the workload controllers (ReplicaSets, Deployments, Jobs) are built from: the one
cluster's cache, writer, event recorder and reactor, whether a namespace still takes new
objects, and the admission step a pod they make goes through."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .cache import ObjectCache
from .events import EventRecorder
from .operators import Admit
from .reactor import Reactor
from .writer import StoreWriter


@dataclass(frozen=True)
class ControllerParts:
    cache: ObjectCache
    writer: StoreWriter
    events: EventRecorder
    reactor: Reactor
    namespace_alive: Callable[[str], bool]
    admit: Admit

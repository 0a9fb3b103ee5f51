"""Timing and behaviour knobs of the simulated cluster.

Tests change these while the cluster runs (for example to make one image slow to pull), so
every component reads them at the moment it needs a value instead of copying them at start.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .programs import ImageProgram

DEFAULT_GAFAELFAWR_URL = "http://gafaelfawr.gafaelfawr.svc.cluster.local:8080"
"""Gafaelfawr's cluster-internal URL where Phalanx installs it."""


@dataclass
class ClusterSettings:
    """How long simulated work takes and how images are named; all durations in seconds."""

    pull_seconds: float = 0.0
    pull_seconds_by_image: dict[str, float] = field(default_factory=dict)
    start_seconds: float = 0.0
    init_seconds: float = 0.0
    namespace_termination_seconds: float = 0.05
    service_account_delay_seconds: float = 0.02
    pod_termination_seconds: float = 0.0
    crash_backoff_seconds: float = 0.05
    job_backoff_seconds: float = 0.05
    """How long the Job controller waits before replacing a failed pod (10 s on a real
    cluster), doubling with each failure in a row; also its first retry of a refused pod."""
    image_digest_resolver: Callable[[str], str | None] | None = None
    default_image_size: int = 500_000_000
    programs: dict[str, ImageProgram] = field(default_factory=dict)
    """Image repository patterns whose containers run as real processes (``programs``)."""
    gafaelfawr_url: str = DEFAULT_GAFAELFAWR_URL
    """Where the simulated Gafaelfawr operator's Ingresses send their auth subrequests (its
    ``baseInternalUrl``), and whose ``/login`` a ``loginRedirect`` sends browsers to; the local
    stack sets its Gafaelfawr emulator's URL."""
    node_files: Path | None = None
    """The one file system every emulated node has: a process-run pod's ``hostPath`` volume is
    the directory of its path under here, whichever node the pod is on, as nodes that mount one
    NFS export at the same place see the same files. None for a directory of the process
    runtime's own, removed when the cluster stops; the local stack keeps it in its state
    directory, so what labs save there outlives a restart."""

    def pull_time(self, image: str) -> float:
        """The simulated pull time of ``image``: the first matching override, else the default."""
        for pattern, seconds in list(self.pull_seconds_by_image.items()):
            if fnmatch.fnmatchcase(image, pattern):
                return max(0.0, float(seconds))
        return max(0.0, self.pull_seconds)

    def resolve_digest(self, image: str) -> str | None:
        """The ``sha256:`` digest of ``image``: pinned in the reference, or from the resolver."""
        if "@sha256:" in image:
            return image.split("@", 1)[1]
        resolver = self.image_digest_resolver
        if resolver is None:
            return None
        try:
            return resolver(image)
        except Exception:  # a registry emulator that fails must not break the kubelet
            return None

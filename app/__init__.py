"""The lab spawner service; ``create_app`` is its app factory.

Importing this package imports nothing heavy. gunicorn's arbiter validates the configuration
(``app.config``) before it forks, and the network libraries (requests, urllib3, redis, the
Kubernetes client) must be imported first in the workers, after the gevent worker has
patched the standard library, or they keep unpatched, blocking sockets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from flask import Flask

    from app.models.config import Config
    from app.models.process_role import ProcessRole
    from app.workloads.kinds import KindFactory


def create_app(
    config: Config | None = None,
    kinds: Sequence[KindFactory] | None = None,
    role: ProcessRole | None = None,
) -> Flask:
    """Build the service from ``config``, or from the file named by the environment.

    Each gunicorn worker calls this after forking, so every process gets its own Redis
    pool, Kubernetes client and Gafaelfawr session. ``kinds``: the kinds of workload to run
    (``app.workloads.kinds.KINDS`` unless a test adds its own). ``role``: what the process
    serves (a runner's port answers only probes and metrics); None for both roles.
    """
    from app.factory import build_app
    from app.models.process_role import ProcessRole

    role = ProcessRole.ALL if role is None else role

    if kinds is None:
        return build_app(config, role=role)
    return build_app(config, kinds, role=role)

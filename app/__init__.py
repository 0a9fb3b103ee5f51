"""The lab spawner service; ``create_app`` is its app factory.

Importing this package imports nothing heavy: the network libraries (requests, urllib3,
redis, the Kubernetes client) must be imported after gevent has patched the standard library
(first thing in gunicorn's settings and in ``runner.py``), or they keep unpatched, blocking
sockets.
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

    Building connects to nothing and starts nothing, so gunicorn's master builds the app
    once and its workers fork with it: redis-py's pools and the direct reads' connections
    open in the process that uses them, the Kubernetes client is built at its first call,
    and what names a process is read in it (``app.storage.leader.WorkerName``).

    ``kinds``: the kinds of workload to run (``app.workloads.kinds.KINDS`` unless a test adds
    its own). ``role``: what the process serves (a runner's port answers only probes and
    metrics); None for both roles.
    """
    from app.factory import build_app
    from app.models.process_role import ProcessRole

    role = ProcessRole.ALL if role is None else role

    if kinds is None:
        return build_app(config, role=role)
    return build_app(config, kinds, role=role)

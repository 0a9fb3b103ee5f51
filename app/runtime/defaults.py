"""Defaults of the server's process shape, read by ``gunicorn.conf.py`` and by the tools
that start the service (the local stack, the benchmarks), so they run what is deployed.

One gevent worker per replica. A worker uses one core at most (the GIL), holds thousands
of connections, and carries its own copy of the Kubernetes client (about 44 MiB of the
70 MiB it holds at rest). On a 2-core machine a second worker bought 1.7 x the status reads
(``status``: 5,642 against 3,213 requests/s) but a slower storm (``storm``: every spawn
complete in 6.73 s against 5.73 s, a POST answered at p50 in 860 against 693 ms), a longer
status tail (p99 1.84 against 1.33 x the p50) and 79 MiB more at the storm's peak
(``docs/developer/benchmarks.md``, "Workers per replica"). More throughput comes from more
replicas, which Kubernetes spreads over nodes and which survive a node, or from
``SPAWNER_WORKERS`` on a replica given more cores.
"""

from __future__ import annotations

DEFAULT_WORKERS = 1
"""gunicorn workers of one replica, unless ``SPAWNER_WORKERS`` says otherwise."""

DEFAULT_RUNNERS = 1
"""Runner workers of one replica, unless ``SPAWNER_WORKERS`` says otherwise in the runner's
container. A runner's operations mostly wait on Kubernetes, and one process keeps
``operations.maxConcurrent`` of them going."""


def default_workers(role: object = None) -> int:
    """gunicorn workers of a process of ``role`` (``app.models.process_role``)."""
    from app.models.process_role import ProcessRole

    return DEFAULT_RUNNERS if role is ProcessRole.RUNNER else DEFAULT_WORKERS

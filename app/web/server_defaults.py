"""Defaults of the server's process shape, read by ``gunicorn.conf.py`` and by the tools
that start the service (the local stack, the benchmarks), so they run what is deployed.

One gevent worker per replica. A worker uses one core at most (the GIL), holds thousands
of connections, and carries its own copy of the Kubernetes client (about 44 MiB of the
70 MiB it holds at rest). On a 2-core machine a second worker bought more status reads a
second but a slower storm, a longer status tail and 60% more memory (the benchmark page
has the figures). More throughput comes from more replicas, which Kubernetes spreads over
nodes and which survive a node, or from ``SPAWNER_WORKERS`` on a replica given more cores.
"""

from __future__ import annotations

DEFAULT_WORKERS = 1
"""gunicorn workers of one replica, unless ``SPAWNER_WORKERS`` says otherwise."""

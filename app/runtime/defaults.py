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

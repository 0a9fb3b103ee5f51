"""Defaults of the server's process shape, read by ``gunicorn.conf.py`` and by the tools
that start the service (the local stack, the benchmarks), so they run what is deployed.

One web worker per usable core, and at least one; ``SPAWNER_WORKERS`` overrides it. The
usable cores are the CPUs the process may run on, narrowed by its cgroup's CPU quota (a
Kubernetes CPU limit): ``app.runtime.cpus`` says how they are read.

Per core, because a gevent worker keeps at most one core busy (one interpreter, the GIL)
while it holds thousands of connections: a replica given more cores uses them only through
more workers, and a second worker on one core buys nothing but a second copy of the libraries
(a web worker holds about 65 MiB at rest) and a core to share. The runner is not counted
here: it is one process beside them (``runner.py``), whose operations mostly wait on
Kubernetes, one process keeping ``operations.maxConcurrent`` of them going.

Not gunicorn's rule of thumb, ``2 * cores + 1``: it is for sync workers, each blocked on one
request's I/O at a time, which need more processes than cores to keep the cores busy while
some wait. A gevent worker waits on all of its connections at once and runs whenever any of
them has work, so it has no wait to cover.

A fractional quota is rounded down. A quota is CPU time per period (100 ms by default) for
all the cgroup's processes together: under 1.5 cores two busy workers use the period's 150 ms
in its first 75 ms and then all wait 25 ms, every open request and event stream with them.
One worker stays under the quota and leaves the half core to the arbiter and the rest of
the pod's processes. Below one core the one worker still runs, throttled.

With no quota the affinity mask alone counts, and in Kubernetes a pod without a CPU limit may
run on every CPU of its node: it would start a worker on each, each with its own memory. Such
a pod needs a CPU limit or ``SPAWNER_WORKERS``.

Before this rule the default was one worker per replica. ``docs/developer/benchmarks.md``
("Workers per replica") compares one and two on a 2-core machine whose cores the load and the
emulators share too, where the second bought 1.7 x the status reads and cost the storm's
latency: it measures that machine, not a replica with cores of its own.
"""

from __future__ import annotations

import math
from pathlib import Path

from app.runtime.cpus import CGROUP_ROOT, PROC_CGROUP, usable_cores


def default_workers(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int:
    """gunicorn workers of one replica unless ``SPAWNER_WORKERS`` says otherwise: one per
    core this process may use (``app.runtime.cpus``, whose paths the arguments are)."""
    return workers_for_cores(usable_cores(cgroup_root, proc_cgroup))


def workers_for_cores(cores: float) -> int:
    """One worker per whole core, at least one: see the module for why down, not up."""
    return max(1, math.floor(cores))

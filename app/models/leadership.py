"""Who leads each elected loop: the facts a leadership lease holds in Redis."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

REPLICA_NAME_ENV = "SPAWNER_REPLICA_NAME"
REPLICA_URL_ENV = "SPAWNER_REPLICA_URL"
REPLICA_PID_ENV = "SPAWNER_REPLICA_PID"
"""The replica's identity, as its processes read it: the name and direct URL the chart (or the
local stack) gives the pod, and the pid of the process that stands for the container: a
gunicorn master sets its own for its workers; the runner, with no master, is that process.
Here, in a module that imports nothing, because the master sets the pid: the network
libraries must first be imported in the workers, after gevent has patched the standard
library."""


@dataclass(frozen=True)
class ReplicaIdentity:
    """One replica of the service: its web gunicorn and its runner.

    ``name`` is what an operator calls it (the pod's name in a cluster), ``url`` where it
    answers directly, bypassing the load balancer (empty when unknown), and ``pid`` the id of
    the process that stands for the container: the web's gunicorn master, or the runner.
    """

    name: str
    url: str
    pid: int


@dataclass(frozen=True)
class Leadership:
    """One elected loop's lease as Redis holds it.

    ``token`` grows by one at every election of the loop: the fencing token that makes a
    deposed leader's writes fail (``app.storage.leader.Fence``). ``owner`` is the worker's
    lease identity (host, pid and a random suffix), ``worker_pid`` its process id.
    """

    loop: str
    owner: str
    token: int
    replica: ReplicaIdentity
    worker_pid: int
    since: float
    """Unix time of the election."""
    expires_in: float
    """Seconds until the lease expires unless its holder renews it."""

    @classmethod
    def from_lease(cls, loop: str, value: str, ttl_ms: int) -> Leadership | None:
        """The leadership a lease's value describes; None if it is not one (a lease left
        by an older release of the service holds a bare worker identity)."""
        try:
            data: Any = json.loads(value)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("replica"), dict):
            return None
        replica = data["replica"]
        return cls(
            loop=loop,
            owner=str(data.get("owner", "")),
            token=int(data.get("token", 0)),
            replica=ReplicaIdentity(
                name=str(replica.get("name", "")),
                url=str(replica.get("url", "")),
                pid=int(replica.get("pid", 0)),
            ),
            worker_pid=int(data.get("worker_pid", 0)),
            since=float(data.get("since", 0.0)),
            expires_in=max(0, ttl_ms) / 1000,
        )

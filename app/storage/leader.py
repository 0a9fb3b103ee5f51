"""Leases in Redis: at most one holder across every worker and replica.

Some work must run in exactly one place at a time (the cluster-wide pod watch, the
prepuller, each user's current operation). Whoever sets the lease key first holds it for
``ttl`` and must renew it well before that runs out; a holder that dies simply stops
renewing, so the key expires and another worker can take over within one ``ttl``. Renewal
and release compare the holder first, atomically, so a worker whose lease already expired
can never extend or delete the lease of its successor.

An elected loop's lease (``LeadershipLease``) also says who holds it (replica and worker,
for ``GET /spawner/v1/leaders``) and carries a fencing token, one more at every election:
the loop's writes name the lease's exact value (``Fence``) and are refused once it moved,
so a leader deposed without knowing it (paused, or cut off from Redis past its lease)
cannot overwrite what its successor wrote.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import redis

from app.models.leadership import (
    REPLICA_NAME_ENV,
    REPLICA_PID_ENV,
    REPLICA_URL_ENV,
    Leadership,
    ReplicaIdentity,
)
from app.storage import scripts


def replica_identity() -> ReplicaIdentity:
    """This process's replica: its name and direct URL from the environment (the chart
    sets the pod's name and address), its master's pid as a gunicorn master announced it;
    the host name and this process where they are not set (the runner, a test's app)."""
    return ReplicaIdentity(
        name=os.environ.get(REPLICA_NAME_ENV) or socket.gethostname(),
        url=os.environ.get(REPLICA_URL_ENV, ""),
        pid=int(os.environ.get(REPLICA_PID_ENV) or os.getpid()),
    )


class WorkerName:
    """A lease holder's name in the process that uses it: host, pid and a random suffix
    (pids repeat across replicas and container restarts).

    Read at each use rather than fixed when made: gunicorn's master builds the app once and
    every worker forks with it (``preload_app``), so a name fixed in the master would be
    every worker's, and two workers would hold one lease as if they were one.
    """

    def __init__(self) -> None:
        self._suffix = uuid.uuid4().hex[:8]

    def __str__(self) -> str:
        return f"{socket.gethostname()}:{os.getpid()}:{self._suffix}"


class RedisLease:
    """One named lease, seen from one would-be holder (``owner``): a workload's, whose
    operations run where it is held (elected loops have a ``LeadershipLease``)."""

    def __init__(self, client: redis.Redis, key: str, owner: str, ttl_seconds: float) -> None:
        self._redis = client
        self.key = key
        self.owner = owner
        self.ttl_ms = max(1, int(ttl_seconds * 1000))
        self._renew = scripts.load(client, "lease_renew")
        self._release = scripts.load(client, "lease_release")

    def acquire(self) -> bool:
        """Take the lease if nobody holds it; True also when we hold it already.

        Being re-entrant lets a holder that is unsure whether it still leads (after a
        Redis hiccup) simply try again instead of waiting out its own lease.
        """
        if self._redis.set(self.key, self.owner, nx=True, px=self.ttl_ms):
            return True
        return self.renew()

    def renew(self) -> bool:
        """Extend the lease by a full ``ttl``; False if someone else holds it (or nobody)."""
        return bool(self._renew(keys=[self.key], args=[self.owner, self.ttl_ms]))

    def release(self) -> bool:
        """Give the lease up at once, if it is still ours, so a successor need not wait."""
        return bool(self._release(keys=[self.key], args=[self.owner]))


class LeadershipLost(Exception):
    """A fenced write was refused: the writer's lease expired or moved to another worker."""


@dataclass(frozen=True)
class Fence:
    """An elected loop's proof of tenure for its writes: its lease's key and the exact value
    the lease held when this tenure began (which includes the election's token)."""

    key: str
    value: str


class LeadershipLease:
    """The lease of one elected loop (``loop``), seen from one candidate (``owner``, by
    default the process that uses it).

    Its value is a JSON object: the owner, the fencing token, the election time, and the
    candidate's replica and pid, so that whoever reads the lease knows who leads.
    """

    def __init__(
        self,
        client: redis.Redis,
        *,
        key: str,
        loop: str,
        owner: str | None = None,
        ttl_seconds: float,
        replica: ReplicaIdentity | None = None,
    ) -> None:
        self._redis = client
        self.key = key
        self.loop = loop
        self._owner = owner
        self._name = WorkerName()
        self._replica = replica
        self.ttl_ms = max(1, int(ttl_seconds * 1000))
        self._value: str | None = None
        self._acquire = scripts.load(client, "leadership_acquire")
        self._renew = scripts.load(client, "lease_renew")
        self._release = scripts.load(client, "lease_release")

    @property
    def owner(self) -> str:
        """The candidate: the name given, else this process's (``WorkerName``)."""
        return self._owner or str(self._name)

    @property
    def token_key(self) -> str:
        return f"{self.key}:token"

    def _details(self) -> str:
        """Who the candidate is, for whoever reads the lease: its replica and process."""
        replica = self._replica or replica_identity()
        return json.dumps({"replica": asdict(replica), "worker_pid": os.getpid()})

    @property
    def fence(self) -> Fence | None:
        """The fence of the tenure in progress (None while not elected)."""
        return None if self._value is None else Fence(self.key, self._value)

    def acquire(self) -> bool:
        """Take the lease if nobody holds it (the next token), or extend it if this
        candidate holds it already (same token); True when held."""
        value = self._acquire(
            keys=[self.key, self.token_key],
            args=[self.owner, self.ttl_ms, self._details(), time.time()],
        )
        self._value = _text(value) if value else None
        return self._value is not None

    def renew(self) -> bool:
        """Extend the lease by a full ``ttl``; False if it expired or moved."""
        if self._value is None:
            return False
        return bool(self._renew(keys=[self.key], args=[self._value, self.ttl_ms]))

    def release(self) -> bool:
        """Give the lease up at once, if it is still this tenure's."""
        value, self._value = self._value, None
        if value is None:
            return False
        return bool(self._release(keys=[self.key], args=[value]))


def read_leaderships(
    client: redis.Redis, leases: Sequence[tuple[str, str]]
) -> list[Leadership | None]:
    """What each ``(loop, lease key)`` holds now, in one round trip: its leadership, or None
    while nobody leads it."""
    pipeline = client.pipeline(transaction=False)
    for _, key in leases:
        pipeline.get(key)
        pipeline.pttl(key)
    replies = pipeline.execute()
    found: list[Leadership | None] = []
    for index, (loop, _) in enumerate(leases):
        value, ttl = replies[2 * index], replies[2 * index + 1]
        found.append(Leadership.from_lease(loop, _text(value), int(ttl)) if value else None)
    return found


def _text(value: str | bytes) -> str:
    """A reply as text, whether the client decodes replies or not."""
    return value.decode() if isinstance(value, bytes) else str(value)

"""A lease in Redis: at most one holder across every worker and replica.

Some work must run in exactly one place at a time (the cluster-wide pod watch, the
prepuller, each user's current operation). Whoever sets the lease key first holds it for
``ttl`` and must renew it well before that runs out; a holder that dies simply stops
renewing, so the key expires and another worker can take over within one ``ttl``. Renewal
and release compare the holder first, atomically, so a worker whose lease already expired
can never extend or delete the lease of its successor.
"""

from __future__ import annotations

import os
import socket
import uuid

import redis

from app.storage import scripts


def worker_identity() -> str:
    """A lease holder's name, unique per process: host, pid and a random suffix (pids
    repeat across replicas)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class RedisLease:
    """One named lease, seen from one would-be holder (``owner``)."""

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

    def holder(self) -> str | None:
        value = self._redis.get(self.key)
        return str(value) if value else None

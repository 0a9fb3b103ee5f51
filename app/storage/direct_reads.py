"""Reads that JupyterHub repeats all day (a lab's status) sent on connections of their own.

A command through ``redis.Redis`` takes a connection from the blocking pool (a lock and a
queue, a check that the socket holds no stray data, which is a system call, and redis-py's
connection-count metrics), runs inside the retry wrapper even with no retries configured,
and gives the connection back through the same lock. For a status request, whose only
work is one ``MGET``, that came to three quarters of the read's CPU
(``python -m bench.request_costs``). Here a free list of connections made like the pool's,
from its public ``connection_class`` and ``connection_kwargs``, serves such reads: a
connection is popped, used for one command and pushed back, with no lock (a list's pop and
append are atomic, and under gevent nothing else runs between them). The connections are
the service's counted ones, so the metrics and the stall breaker (``app.extensions``) see
these round trips as any other.

At most ``LIMIT`` connections are kept; a read that finds none free while that many are in
use goes through the client's pool as before (the count of those in use is exact under
gevent; with threads it may drift by a few, which only moves that point). A connection
that fails is closed and dropped, and the error reaches the caller as from the client (no
retries either way). With
Sentinel the client's pool alone is used: it follows a failover (it drops connections to a
demoted primary), which a list of its own would have to learn again.
"""

from __future__ import annotations

import os
from typing import Any, cast

import redis
from redis.sentinel import SentinelConnectionPool

LIMIT = 32
"""Connections a store keeps for its direct reads, on top of the client's pool (at most the
pool's own limit)."""


class DirectReads:
    """``MGET`` on a free list of connections, for reads that must cost the least."""

    def __init__(self, pool: redis.ConnectionPool, limit: int = LIMIT) -> None:
        self._connection_class = pool.connection_class
        self._connection_kwargs = dict(pool.connection_kwargs)
        self._limit = max(1, min(limit, pool.max_connections))
        self._free: list[Any] = []
        self._in_use = 0
        self._pid = os.getpid()

    @classmethod
    def of(cls, client: redis.Redis) -> DirectReads | None:
        """Direct reads beside ``client``'s pool, or None where the pool alone must be used
        (Sentinel, or a pool of another kind)."""
        pool = client.connection_pool
        if isinstance(pool, SentinelConnectionPool) or not isinstance(pool, redis.ConnectionPool):
            return None
        return cls(pool)

    def mget(self, *keys: str) -> list[str | None] | None:
        """The values of ``keys``, or None when every kept connection is in use (the
        caller then reads through its client)."""
        connection = self._take()
        if connection is None:
            return None
        try:
            connection.send_command("MGET", *keys)
            values = connection.read_response()
        except redis.ResponseError:
            self._give_back(connection)
            raise
        except BaseException:
            self._in_use -= 1
            connection.disconnect()
            raise
        self._give_back(connection)
        return cast(list[str | None], values)

    def _take(self) -> Any:
        if self._pid != os.getpid():
            # A forked process must not share its parent's sockets.
            self._pid = os.getpid()
            self._free = []
            self._in_use = 0
        try:
            connection = self._free.pop()
        except IndexError:
            if self._in_use >= self._limit:
                return None
            connection = self._connection_class(**self._connection_kwargs)
        self._in_use += 1
        return connection

    def _give_back(self, connection: Any) -> None:
        self._in_use -= 1
        self._free.append(connection)

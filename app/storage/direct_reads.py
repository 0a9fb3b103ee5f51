"""Reads that are repeated all day (a lab's status, the list of labs) sent on connections of
their own.

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
    """Read commands on a free list of connections, for reads that must cost the least."""

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
        replies = self.replies(("MGET", *keys))
        return None if replies is None else cast(list[str | None], replies[0])

    def replies(self, *commands: tuple[str, ...]) -> list[Any] | None:
        """Each command's reply as Redis sends it (a set's members as a list, a count as
        an int: none of the client's conversions), all sent in one round trip; None when
        every kept connection is in use. For read commands only: nothing is retried."""
        connection = self._take()
        if connection is None:
            return None
        replies: list[Any] = []
        try:
            connection.send_packed_command(connection.pack_commands(commands))
            for _ in commands:
                replies.append(connection.read_response())
        except redis.ResponseError:
            if len(replies) == len(commands) - 1:
                # The last reply was the error: the connection has nothing left to read.
                self._give_back(connection)
            else:
                self._drop(connection)
            raise
        except BaseException:
            self._drop(connection)
            raise
        self._give_back(connection)
        return replies

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

    def _drop(self, connection: Any) -> None:
        """A connection that failed, or still holds replies nobody will read."""
        self._in_use -= 1
        connection.disconnect()

"""Fail fast while a Redis server does not answer.

A stalled server (a hung host, a partition, a paused process) accepts connections and
never answers: each command waits the whole socket timeout. Without a memory of that, every
command of every request and background loop waits it again, in turn: a request that makes
three round trips takes three timeouts, and connections held by waiting commands make the
next requests wait for the pool first, so answers come in steps of the timeout, long after
the documented one.

So a process remembers, per server address, that a command waited out its timeout. Until
the server answers again, one command at a time (the *probe*), at most one a
``PROBE_INTERVAL``, is sent to it; every other fails at once with ``RedisStalledError``, a
``redis.ConnectionError``, answered 503 ``dependency_unavailable`` like any other outage.
The interval keeps requests queued behind one another (on a lock, say) from each becoming
the next probe in turn and waiting a whole timeout again. The first answer the probe (or
any command already under way) gets ends the stall, so the process recovers by itself
within about a ``PROBE_INTERVAL`` of the server. Any answer counts, an error reply
included: only silence is a stall.
"""

from __future__ import annotations

import threading
import time

import redis

PROBE_INTERVAL = 1.0
"""Seconds between the end of one probe (or the start of a stall) and the next probe."""


class RedisStalledError(redis.ConnectionError):
    """Redis has not answered a command within its socket timeout, and has not answered
    any since: this command was not sent."""


class StallBreaker:
    """One server's stall, shared by every connection of the process to it."""

    def __init__(self, address: str) -> None:
        self._address = address
        self._lock = threading.Lock()
        self._since: float | None = None
        self._probe: object | None = None
        self._next_probe = 0.0

    def before_send(self, connection: object) -> None:
        """Let the command go, or refuse it at once while the server is stalled and another
        command is already finding out whether it answers again."""
        now = time.monotonic()
        with self._lock:
            if self._since is None or self._probe is connection:
                return
            if self._probe is None and now >= self._next_probe:
                self._probe = connection
                return
            silent = now - self._since
        raise RedisStalledError(
            f"Redis at {self._address} has not answered for {silent:.1f} s; "
            "not waiting on it again until it does"
        )

    def answered(self) -> None:
        """The server answered: it is not stalled (any more)."""
        with self._lock:
            self._since = None
            self._probe = None

    def timed_out(self, connection: object) -> None:
        """A command of ``connection`` waited out its socket timeout."""
        now = time.monotonic()
        with self._lock:
            if self._since is None:
                self._since = now
            if self._probe is connection or self._probe is None:
                self._probe = None
                self._next_probe = now + PROBE_INTERVAL

    def released(self, connection: object) -> None:
        """``connection`` failed otherwise or was closed: if it was the probe, the next
        command may be."""
        with self._lock:
            if self._probe is connection:
                self._probe = None
                self._next_probe = time.monotonic() + PROBE_INTERVAL


_BREAKERS: dict[str, StallBreaker] = {}
_BREAKERS_LOCK = threading.Lock()


def breaker_for(address: str) -> StallBreaker:
    """The process's breaker for the server at ``address`` (``host:port`` or a socket's
    path): every client and pool of the process that talks to it shares it."""
    with _BREAKERS_LOCK:
        breaker = _BREAKERS.get(address)
        if breaker is None:
            breaker = _BREAKERS[address] = StallBreaker(address)
        return breaker

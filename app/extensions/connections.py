"""The connections the Kubernetes client makes its requests on.

urllib3's own connections cost a spawn twice on every call:

- **Two writes per request.** urllib3 writes a request's headers, then its body. The API
  server wakes up for the headers, parses them, and waits again for the body: on the
  loopback of a virtual machine a wake-up costs more than the parsing, and a spawn makes
  eight creates in a row. These connections hold the headers back when a body follows and
  write both at once.
- **A liveness check that yields.** Before reusing a kept-alive connection, urllib3 asks
  whether the server closed it, with a zero-timeout ``poll``. Under gevent's
  monkey-patching that ``poll`` hands control to the event loop, so every Kubernetes call
  waits behind whatever else is ready (a request being answered, an event stream being
  served) before its first byte leaves.
  The check here asks the operating system directly; it never waits, so it needs no
  event loop.
"""

from __future__ import annotations

import select
from collections.abc import Callable
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection


def _unpatched_poll() -> Callable[[], Any]:
    """``select.poll`` as the operating system provides it, even after monkey-patching."""
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a dependency of the service
        return select.poll
    return monkey.get_original("select", "poll")


_POLL = _unpatched_poll()


class _KubernetesConnection:
    """Mixin for urllib3's connections: one write per request, a non-yielding liveness
    check."""

    _hold_headers = False
    _held: bytes | None = None
    sock: Any

    @property
    def is_connected(self) -> bool:
        """Whether the connection is still usable: a socket with anything to read (the
        server's close, or bytes nobody asked for) is not, as urllib3 judges it."""
        if self.sock is None:
            return False
        poller = _POLL()
        poller.register(self.sock.fileno(), select.POLLIN)
        return not poller.poll(0)

    def request(self, method: str, url: str, body: Any = None, *args: Any, **kwargs: Any) -> None:
        self._hold_headers = body is not None
        try:
            super().request(method, url, body, *args, **kwargs)  # type: ignore[misc]
        except BaseException:
            self._held = None
            raise
        finally:
            self._hold_headers = False
        if self._held is not None:
            # The body turned out empty: the headers go alone.
            held, self._held = self._held, None
            super().send(held)  # type: ignore[misc]

    def send(self, data: Any) -> None:
        if self._hold_headers and isinstance(data, bytes):
            self._hold_headers = False
            self._held = data
            return
        if self._held is not None:
            held, self._held = self._held, None
            if isinstance(data, bytes):
                data = held + data
            else:
                super().send(held)  # type: ignore[misc]
        super().send(data)  # type: ignore[misc]


class KubernetesHTTPConnection(_KubernetesConnection, HTTPConnection):
    """urllib3's plain-HTTP connection, with the changes above."""


class KubernetesHTTPSConnection(_KubernetesConnection, HTTPSConnection):
    """urllib3's TLS connection, with the changes above."""


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = KubernetesHTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = KubernetesHTTPSConnection


def install(pool_manager: urllib3.PoolManager) -> None:
    """Make ``pool_manager`` open its connections with these classes (before its first
    request: pools already made keep theirs)."""
    pool_manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

"""Kubernetes requests written to the socket in one piece.

urllib3 writes a request's headers, then its body, in two ``send`` calls. The API server
wakes up for the headers, parses them, and waits again for the body: on the loopback of a
virtual machine a wake-up costs more than the parsing, and a spawn makes eight creates in a
row. The connections here hold the headers back when a body follows and write both at once.
"""

from __future__ import annotations

from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection


class _HeadersWithBody:
    """Mixin for urllib3's connections: the header block waits for the first body write."""

    _hold_headers = False
    _held: bytes | None = None

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


class OneWriteHTTPConnection(_HeadersWithBody, HTTPConnection):
    """urllib3's plain-HTTP connection, writing each request in one piece."""


class OneWriteHTTPSConnection(_HeadersWithBody, HTTPSConnection):
    """urllib3's TLS connection, writing each request in one piece."""


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = OneWriteHTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = OneWriteHTTPSConnection


def install(pool_manager: urllib3.PoolManager) -> None:
    """Make ``pool_manager`` open its connections with these classes (before its first
    request: pools already made keep theirs)."""
    pool_manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

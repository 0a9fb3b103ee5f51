"""Minimal HTTP over raw sockets, for load and timing clients that must stay cheap.

HTTP/1.0 (``exchange``) keeps parsing trivial: the server neither chunks the body nor keeps
the connection, so a response is the header block, then bytes until the server closes.
``KeepAliveConnection`` speaks HTTP/1.1 on one connection, for a client that times requests
one after another and must not pay a new connection each time.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable, Iterator, Mapping


def request_bytes(
    method: str, host: str, port: int, path: str, headers: Mapping[str, str], body: bytes = b""
) -> bytes:
    lines = [f"{method} {path} HTTP/1.0", f"Host: {host}:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def split_head(buffer: bytes) -> tuple[int, bytes] | None:
    """``(status, rest of the buffer)`` once the header block is complete, else None."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    status_line = buffer[: buffer.find(b"\r\n")].decode("latin-1")
    parts = status_line.split(" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return status, buffer[end + 4 :]


def exchange(
    sock_factory: Callable[[tuple[str, int], float], socket.socket],
    method: str,
    host: str,
    port: int,
    path: str,
    headers: Mapping[str, str],
    body: bytes = b"",
    on_body: Callable[[bytes], bool] | None = None,
    timeout: float = 60.0,
) -> tuple[int, bytes]:
    """Send one request and read its response.

    ``on_body`` receives body bytes as they arrive and returns True to stop reading early
    (an event stream that reached its terminal event); without it the body is returned.
    ``sock_factory`` is ``socket.create_connection`` or gevent's equivalent.
    """
    sock = sock_factory((host, port), timeout)
    try:
        sock.sendall(request_bytes(method, host, port, path, headers, body))
        buffer = b""
        status: int | None = None
        parts: list[bytes] = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            if status is None:
                buffer += chunk
                head = split_head(buffer)
                if head is None:
                    continue
                status, chunk = head
                buffer = b""
                if not chunk:
                    continue
            if on_body is not None:
                if on_body(chunk):
                    break
            else:
                parts.append(chunk)
        return status or 0, b"".join(parts)
    finally:
        sock.close()


class KeepAliveConnection:
    """HTTP/1.1 requests on one kept-alive connection, each written in one piece.

    For the latency benchmark's timing client, which must add as little as possible to
    what it times: ``requests`` spent about 0.8 ms preparing a POST before its first byte
    and wrote its headers and body apart. Responses are read by ``Content-Length`` or
    chunked transfer encoding; a response that says ``Connection: close`` (or a connection
    the server closed while idle) makes the next request connect again.
    """

    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self._sock: socket.socket | None = None
        self._buffer = b""

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock, self._buffer = None, b""

    def request(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes = b""
    ) -> KeepAliveResponse:
        """Send the request and read the status line and headers; the body is read from
        the returned response (it must be, before the next request)."""
        if self._sock is not None and _closed_by_peer(self._sock):
            self.close()
        if self._sock is None:
            self._sock = socket.create_connection((self.host, self.port), self.timeout)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body or method in ("POST", "PUT"):
            lines.append(f"Content-Length: {len(body)}")
        self._sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        head = self._read_until(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        parts = status_line.split(" ", 2)
        found: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            found[name.strip().lower()] = value.strip()
        return KeepAliveResponse(self, int(parts[1]), found)

    def _fill(self) -> None:
        assert self._sock is not None
        data = self._sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self._buffer += data

    def _read_until(self, marker: bytes) -> bytes:
        while (end := self._buffer.find(marker)) < 0:
            self._fill()
        found, self._buffer = self._buffer[:end], self._buffer[end + len(marker) :]
        return found

    def _read_exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            self._fill()
        found, self._buffer = self._buffer[:size], self._buffer[size:]
        return found


class KeepAliveResponse:
    """A response's status and headers, and its body as it arrives."""

    def __init__(self, connection: KeepAliveConnection, status: int, headers: dict[str, str]):
        self._connection = connection
        self.status = status
        self.headers = headers
        self._done = False

    def chunks(self) -> Iterator[bytes]:
        """The body, piece by piece as the server sent it; the connection is ready for the
        next request (or closed, if the server said so) once this is exhausted."""
        connection = self._connection
        if self._done:
            return
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int(connection._read_until(b"\r\n").split(b";")[0], 16)
                if size == 0:
                    connection._read_until(b"\r\n")
                    break
                data = connection._read_exactly(size)
                connection._read_exactly(2)
                yield data
        else:
            length = int(self.headers.get("content-length") or 0)
            if length:
                yield connection._read_exactly(length)
        self._done = True
        if self.headers.get("connection", "").lower() == "close":
            connection.close()

    def read(self) -> bytes:
        return b"".join(self.chunks())


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether an idle kept-alive socket was closed by the server (it is readable)."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)

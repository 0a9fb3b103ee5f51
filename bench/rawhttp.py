"""Minimal HTTP/1.0 requests over raw sockets, for load clients that must stay cheap.

HTTP/1.0 keeps parsing trivial: the server neither chunks the body nor keeps the
connection, so a response is the header block, then bytes until the server closes.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping


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

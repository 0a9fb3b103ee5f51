"""A loopback TCP proxy in front of the service that can misbehave on request.

It lets the client tests meet real network failures without touching the service: answer the
next connections with an HTTP error, accept and never answer, or cut every open connection
mid-stream. It records the request head each new connection starts with.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass


@dataclass
class Misbehaviour:
    status: int | None = None
    silent: bool = False


class FaultProxy:
    """Forwards 127.0.0.1:<port> to ``upstream`` (``host``, ``port``)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.heads: list[str] = []
        self._faults: list[Misbehaviour] = []
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def fail_next(self, count: int, status: int = 503) -> None:
        with self._lock:
            self._faults.extend(Misbehaviour(status=status) for _ in range(count))

    def stall_next(self, count: int = 1) -> None:
        with self._lock:
            self._faults.extend(Misbehaviour(silent=True) for _ in range(count))

    def cut(self) -> None:
        """Close every connection open through the proxy, both sides."""
        with self._lock:
            sockets, self._open = self._open, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._listener.close()
        self.cut()

    # Internals --------------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(65536)
            if not chunk:
                client.close()
                return
            head += chunk
        with self._lock:
            self.heads.append(head.split(b"\r\n\r\n", 1)[0].decode("latin-1"))
            fault = self._faults.pop(0) if self._faults else None
            self._open.append(client)
        if fault is not None and fault.silent:
            return  # hold the connection open and never answer
        if fault is not None:
            body = b'{"code": "injected", "message": "injected failure"}'
            client.sendall(
                f"HTTP/1.1 {fault.status} Injected\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            client.close()
            return
        upstream = socket.create_connection(self.upstream)
        with self._lock:
            self._open.append(upstream)
        upstream.sendall(head)
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
        _pump(client, upstream)


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        with contextlib.suppress(OSError):  # either side closed: stop pumping
            while chunk := source.recv(65536):
                target.sendall(chunk)
    finally:
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

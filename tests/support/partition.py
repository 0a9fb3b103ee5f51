"""A loopback TCP proxy that can partition its clients from their server and heal.

While partitioned, connections stay open but no byte crosses in either direction, and new
connections are accepted but not forwarded: what a network partition looks like to a client
(its reads time out; nothing is refused). Healing lets the held bytes through.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class PartitionProxy:
    """Forwards 127.0.0.1:<port> to ``upstream`` (``host``, ``port``)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._connected = threading.Event()
        self._connected.set()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def partition(self) -> None:
        self._connected.clear()

    def heal(self) -> None:
        self._connected.set()

    def close(self) -> None:
        self._connected.set()
        self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self._connected.wait()
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        with self._lock:
            self._sockets += [client, upstream]
        threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()
        self._pump(client, upstream)

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):  # either side closed: stop pumping
            while chunk := source.recv(65536):
                self._connected.wait()
                target.sendall(chunk)
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

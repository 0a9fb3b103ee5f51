"""The Kubernetes client's connections: each request leaves in one write, headers and body
together, and checking a kept-alive connection never hands control to gevent's loop."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3

from app.extensions import connections
from app.extensions.connections import KubernetesHTTPConnection


class _Recording:
    """A socket whose writes are recorded (and still made)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.writes: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self._sock.sendall(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


@pytest.fixture
def server() -> Iterator[tuple[int, list[bytes]]]:
    """Answers every request with an empty 200, keeping what each request carried."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                buffer = b""
                while True:
                    data = conn.recv(65536)
                    if not data:
                        break
                    buffer += data
                    head, sep, rest = buffer.partition(b"\r\n\r\n")
                    if not sep:
                        continue
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    if len(rest) < length:
                        continue
                    received.append(head + sep + rest[:length])
                    buffer = rest[length:]
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], received
    listener.close()


def _connection(port: int) -> tuple[KubernetesHTTPConnection, _Recording]:
    conn = KubernetesHTTPConnection("127.0.0.1", port)
    conn.connect()
    recording = _Recording(conn.sock)
    conn.sock = recording
    return conn, recording


@pytest.mark.parametrize("body", [b'{"kind": "Pod"}', '{"kind": "Pod"}'])
def test_a_request_with_a_body_is_one_write(server: tuple[int, list[bytes]], body: Any) -> None:
    port, received = server
    conn, recording = _connection(port)
    conn.request("POST", "/api/v1/namespaces", body=body, headers={"X-Test": "1"})
    assert conn.getresponse().status == 200
    assert len(recording.writes) == 1
    assert recording.writes[0].startswith(b"POST /api/v1/namespaces HTTP/1.1\r\n")
    assert recording.writes[0].endswith(b'\r\n\r\n{"kind": "Pod"}')
    assert received == recording.writes


def test_requests_without_a_body_or_with_an_empty_one_still_send_their_headers(
    server: tuple[int, list[bytes]],
) -> None:
    port, received = server
    conn, recording = _connection(port)
    conn.request("GET", "/api/v1/namespaces/a")
    assert conn.getresponse().status == 200
    conn.request("PUT", "/api/v1/namespaces/a", body=b"")
    assert conn.getresponse().status == 200
    assert [w.split(b" ", 1)[0] for w in recording.writes] == [b"GET", b"PUT"]
    assert len(received) == 2


def test_install_gives_a_pool_manager_these_connections(server: tuple[int, list[bytes]]) -> None:
    port, received = server
    manager = urllib3.PoolManager()
    connections.install(manager)
    response = manager.request("POST", f"http://127.0.0.1:{port}/x", body=b"{}")
    assert response.status == 200
    pool = manager.connection_from_url(f"http://127.0.0.1:{port}/")
    assert pool.ConnectionCls is KubernetesHTTPConnection
    assert received[-1].endswith(b"\r\n\r\n{}")


def test_a_live_idle_connection_is_connected(server: tuple[int, list[bytes]]) -> None:
    port, _ = server
    conn, _ = _connection(port)
    conn.request("GET", "/api/v1/namespaces/a")
    assert conn.getresponse().status == 200
    assert conn.is_connected


def test_a_connection_the_server_closed_or_wrote_to_unasked_is_not() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    unasked = KubernetesHTTPConnection("127.0.0.1", port)
    unasked.connect()
    peer, _ = listener.accept()
    peer.sendall(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
    closed = KubernetesHTTPConnection("127.0.0.1", port)
    closed.connect()
    peer2, _ = listener.accept()
    peer2.close()
    try:
        assert not unasked.is_connected
        assert not closed.is_connected
        assert not KubernetesHTTPConnection("127.0.0.1", port).is_connected
    finally:
        peer.close()
        listener.close()


_UNDER_GEVENT = """
from gevent import monkey
monkey.patch_all()
import json, socket
import gevent
from app.extensions.connections import KubernetesHTTPConnection
from urllib3.connection import HTTPConnection

listener = socket.create_server(("127.0.0.1", 0))
port = listener.getsockname()[1]
found = {}
for label, cls in (("ours", KubernetesHTTPConnection), ("urllib3", HTTPConnection)):
    conn = cls("127.0.0.1", port)
    conn.connect()
    peer, _ = listener.accept()
    ran = []
    gevent.spawn(ran.append, 1)
    found[label] = {"connected": conn.is_connected, "other_greenlet_ran": bool(ran)}
    gevent.sleep(0)
    peer.close()
    found[label + "_after_close"] = gevent.wait([gevent.spawn(lambda: conn.is_connected)])[0].value
print(json.dumps(found))
"""


def test_checking_a_connection_under_gevent_lets_nothing_else_run_first() -> None:
    """urllib3's own check runs another ready greenlet before the request is written; ours
    answers at once, and alike."""
    done = subprocess.run(
        [sys.executable, "-c", _UNDER_GEVENT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["urllib3"] == {"connected": True, "other_greenlet_ran": True}
    assert found["ours"] == {"connected": True, "other_greenlet_ran": False}
    assert found["ours_after_close"] is False
    assert found["urllib3_after_close"] is False

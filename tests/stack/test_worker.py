"""The gunicorn worker: connections take turns, and idle keep-alive connections close."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from devstack.redis_process import free_port

ROOT = Path(__file__).resolve().parents[2]
PIPELINED = 2000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """One worker of the service's settings serving ``echo_app``, with a 1 s keep-alive;
    its port and access log."""
    port = free_port()
    access_log = tmp_path / "access.log"
    env = {
        **os.environ,
        "SPAWNER_BIND": f"127.0.0.1:{port}",
        "SPAWNER_WORKERS": "1",
        "SPAWNER_KEEPALIVE": "1",
        "SPAWNER_ACCESS_LOG": str(access_log),
    }
    command = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"]
    process = subprocess.Popen(
        [*command, "--no-control-socket", "tests.support.echo_app:app"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(f"http://127.0.0.1:{port}/ready", timeout=1)
                break
            except (requests.ConnectionError, requests.Timeout):
                # The master's socket accepts before its worker has booted to answer.
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        yield port, access_log
    finally:
        process.terminate()
        process.wait(timeout=30)


def _read_responses(sock: socket.socket, count: int) -> bytes:
    """Read ``count`` whole responses (each body ends with ``]``, as no header does)."""
    data = b""
    while data.count(b"]") < count:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection early"
        data += chunk
    return data


def test_a_busy_connection_does_not_starve_another(server: tuple[int, Path]) -> None:
    """A connection whose next request is always waiting (here, 2000 pipelined at once)
    gives way after each response, so another connection's request, sent right after, is
    served among the first of them rather than after all of them.

    Both connections are served once first, so each already has its greenlet waiting for
    a request. The bound leaves room for the client to be descheduled between seeing the
    busy connection served and sending the other request, on a loaded machine; a stock
    worker serves all 2000 first."""
    port, access_log = server
    busy = socket.create_connection(("127.0.0.1", port))
    other = socket.create_connection(("127.0.0.1", port))
    with busy, other:
        for sock in (busy, other):
            sock.sendall(b"GET /warm HTTP/1.1\r\nHost: x\r\n\r\n")
            _read_responses(sock, 1)
        requests_text = "".join(
            f"GET /busy/{i} HTTP/1.1\r\nHost: x\r\n\r\n" for i in range(PIPELINED)
        )
        sender = threading.Thread(target=busy.sendall, args=(requests_text.encode(),))
        sender.start()
        answered = _read_responses(busy, 1).count(b"]")  # the busy connection is being served
        other.sendall(b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"[/other]" in _read_responses(other, 1)
        _read_responses(busy, PIPELINED - answered)
        sender.join()
    deadline = time.monotonic() + 10
    while access_log.read_text().count("/busy/") < PIPELINED and time.monotonic() < deadline:
        time.sleep(0.05)
    paths = [line.split()[2] for line in access_log.read_text().splitlines() if '"GET /' in line]
    served = [p for p in paths if p.startswith(("/busy/", "/other"))]
    assert served.index("/other") < PIPELINED // 4, served.index("/other")


def test_an_idle_keep_alive_connection_is_closed(server: tuple[int, Path]) -> None:
    """After ``keepalive`` seconds without a request the worker closes the connection, so
    a stopping worker never waits out its graceful timeout for idle clients."""
    port, _ = server
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /once HTTP/1.1\r\nHost: x\r\n\r\n")
        _read_responses(sock, 1)
        sock.settimeout(10)
        assert sock.recv(1) == b""

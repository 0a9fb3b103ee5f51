"""A keep-alive HTTP load generator on epoll, for machines without ``wrk``.

Run as its own process: ``python -m bench.loadgen`` with a JSON job on stdin (host, port,
paths, headers, connections, duration); prints requests/s, status counts and latency
percentiles as JSON. One thread drives every connection; each connection sends its next
request as soon as the previous response is complete.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Conn:
    sock: socket.socket
    buffer: bytes = b""
    sent_at: float = 0.0
    expected: int | None = None
    head_end: int = -1
    status: int = 0
    latencies: list[float] = field(default_factory=list)


def _request(path: str, host: str, port: int, headers: dict[str, str]) -> bytes:
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _parse(conn: _Conn) -> bool:
    """True once ``conn.buffer`` holds a complete response (which is then consumed)."""
    if conn.head_end < 0:
        end = conn.buffer.find(b"\r\n\r\n")
        if end < 0:
            return False
        conn.head_end = end + 4
        head = conn.buffer[:end].decode("latin-1").split("\r\n")
        conn.status = int(head[0].split(" ")[1])
        conn.expected = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                conn.expected = int(value.strip())
    assert conn.expected is not None
    total = conn.head_end + conn.expected
    if len(conn.buffer) < total:
        return False
    conn.buffer = conn.buffer[total:]
    conn.head_end = -1
    conn.expected = None
    return True


def run(job: dict[str, Any]) -> dict[str, Any]:
    host, port = job["host"], int(job["port"])
    requests = [_request(p, host, port, job.get("headers", {})) for p in job["paths"]]
    poller = select.epoll()
    conns: dict[int, _Conn] = {}
    counter = 0
    statuses: dict[int, int] = {}
    for _ in range(int(job["connections"])):
        sock = socket.create_connection((host, port))
        sock.setblocking(False)
        conn = _Conn(sock)
        conns[sock.fileno()] = conn
        poller.register(sock.fileno(), select.EPOLLIN)
    started = time.monotonic()
    deadline = started + float(job["duration"])
    for conn in conns.values():
        conn.sent_at = time.monotonic()
        conn.sock.send(requests[counter % len(requests)])
        counter += 1
    done = 0
    while time.monotonic() < deadline:
        for fd, _ in poller.poll(0.1):
            conn = conns[fd]
            try:
                data = conn.sock.recv(65536)
            except BlockingIOError:
                continue
            if not data:
                poller.unregister(fd)
                statuses[-1] = statuses.get(-1, 0) + 1
                continue
            conn.buffer += data
            now = time.monotonic()
            while _parse(conn):
                done += 1
                statuses[conn.status] = statuses.get(conn.status, 0) + 1
                conn.latencies.append(now - conn.sent_at)
                conn.sent_at = now
                conn.sock.send(requests[counter % len(requests)])
                counter += 1
    elapsed = time.monotonic() - started
    latencies = sorted(x for c in conns.values() for x in c.latencies)
    for conn in conns.values():
        conn.sock.close()

    def pct(fraction: float) -> float | None:
        if not latencies:
            return None
        return round(latencies[min(len(latencies) - 1, int(fraction * len(latencies)))] * 1000, 2)

    return {
        "tool": "bench.loadgen",
        "requests": done,
        "requests_per_second": round(done / elapsed, 1),
        "statuses": {str(k): v for k, v in statuses.items()},
        "latency_ms": {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99)},
    }


def main() -> None:
    json.dump(run(json.load(sys.stdin)), sys.stdout)


if __name__ == "__main__":
    main()

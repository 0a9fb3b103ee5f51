"""The event-stream benchmark's client, run as its own process: ``python -m bench.stream_client``.

Holds thousands of server-sent event streams on one epoll loop in one thread: no greenlet
or coroutine per stream, so receiving an event costs a ``recv`` and a few byte searches.
Each event's arrival time is the moment ``epoll.poll`` returned it (``time.monotonic``,
which is the same clock in every process), so the client's own processing order does not
inflate the latencies of the streams it reads last.

Reads a job (JSON) on stdin. Prints one JSON line when every stream has replayed its first
event (or the open timeout passed), then records events whose data is ``round-<n>`` until
every stream has ended (a terminal event or EOF) or the run timeout passes, and prints a
final JSON line.
"""

from __future__ import annotations

import contextlib
import errno
import json
import resource
import select
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from bench.rawhttp import request_bytes, split_head

TERMINAL = (b"complete", b"failed")


@dataclass
class Stream:
    user: str
    sock: socket.socket
    sent: bool = False
    status: int | None = None
    buffer: bytes = b""
    ready: bool = False
    closed: bool = False
    terminal: bool = False
    keepalives: int = 0
    rounds: dict[int, float] = field(default_factory=dict)


def _raise_file_limit(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(max(soft, wanted), hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def _handle_blocks(stream: Stream, now: float) -> None:
    while True:
        end = stream.buffer.find(b"\n\n")
        if end < 0:
            return
        block = stream.buffer[:end]
        stream.buffer = stream.buffer[end + 2 :]
        if block.startswith(b":"):
            stream.keepalives += 1
            continue
        kind = b"message"
        data = b""
        for line in block.split(b"\n"):
            if line.startswith(b"event:"):
                kind = line[6:].strip()
            elif line.startswith(b"data:"):
                data = line[5:].strip()
        stream.ready = True
        if data.startswith(b"round-"):
            stream.rounds.setdefault(int(data[6:]), now)
        if kind in TERMINAL:
            stream.terminal = True


def main() -> None:
    job: dict[str, Any] = json.load(sys.stdin)
    host, port = job["host"], int(job["port"])
    users: list[str] = job["users"]
    headers = {"Authorization": f"Bearer {job['token']}", "Accept": "text/event-stream"}
    limit = _raise_file_limit(len(users) + 256)
    poller = select.epoll()
    streams: dict[int, Stream] = {}
    batch = int(job.get("open_batch", 200))
    errors: dict[str, int] = {}

    def note(error: str) -> None:
        errors[error] = errors.get(error, 0) + 1

    def close(fd: int, stream: Stream) -> None:
        if stream.closed:
            return
        stream.closed = True
        with contextlib.suppress(OSError, ValueError):
            poller.unregister(fd)
        stream.sock.close()

    def pump(timeout: float) -> None:
        events = poller.poll(timeout)
        now = time.monotonic()
        for fd, mask in events:
            stream = streams[fd]
            if stream.closed:
                continue
            if not stream.sent and mask & select.EPOLLOUT:
                err = stream.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    note(f"connect-{errno.errorcode.get(err, err)}")
                    close(fd, stream)
                    continue
                path = f"/spawner/v1/labs/{stream.user}/events"
                stream.sock.send(request_bytes("GET", host, port, path, headers))
                stream.sent = True
                poller.modify(fd, select.EPOLLIN)
                continue
            if mask & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR):
                try:
                    data = stream.sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as exc:
                    note(f"recv-{type(exc).__name__}")
                    close(fd, stream)
                    continue
                if not data:
                    if not stream.terminal:
                        note(f"eof-before-end-http-{stream.status}")
                    close(fd, stream)
                    continue
                stream.buffer += data
                if stream.status is None:
                    head = split_head(stream.buffer)
                    if head is None:
                        continue
                    stream.status, stream.buffer = head
                    if stream.status != 200:
                        note(f"http-{stream.status}")
                _handle_blocks(stream, now)

    opened_at = time.monotonic()
    for start in range(0, len(users), batch):
        for user in users[start : start + batch]:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            code = sock.connect_ex((host, port))
            if code not in (0, errno.EINPROGRESS):
                note(f"connect-{errno.errorcode.get(code, code)}")
                sock.close()
                continue
            streams[sock.fileno()] = Stream(user, sock)
            poller.register(sock.fileno(), select.EPOLLOUT)
        pump(0.02)
    deadline = time.monotonic() + float(job.get("open_timeout", 60))
    while time.monotonic() < deadline:
        if all(s.ready or s.closed for s in streams.values()):
            break
        pump(0.05)
    ready = sum(1 for s in streams.values() if s.ready and not s.closed)
    print(
        json.dumps(
            {
                "phase": "ready",
                "streams": len(users),
                "ready": ready,
                "open_seconds": round(time.monotonic() - opened_at, 3),
                "errors": errors,
                "file_limit": limit,
            }
        ),
        flush=True,
    )
    deadline = time.monotonic() + float(job.get("run_timeout", 120))
    while time.monotonic() < deadline and not all(s.closed for s in streams.values()):
        pump(0.05)
        for fd, stream in list(streams.items()):
            if stream.terminal and not stream.closed:
                close(fd, stream)
    rounds: dict[str, list[float]] = {}
    for stream in streams.values():
        for number, at in stream.rounds.items():
            rounds.setdefault(str(number), []).append(at)
    print(
        json.dumps(
            {
                "phase": "done",
                "ended_with_terminal_event": sum(1 for s in streams.values() if s.terminal),
                "still_open": sum(1 for s in streams.values() if not s.closed),
                "keepalives": sum(s.keepalives for s in streams.values()),
                "errors": errors,
                "rounds": rounds,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()

"""Who listens at an address: the process behind a port, read from ``/proc``.

A kubelet's probe reaches the container through the pod's own network namespace, so only
the pod's processes can answer it. On the local stack every pod shares the machine's
loopback, and any process could be the one listening at a pod's address and port (another
stack's lab, a stray server): a probe that merely connects would take that process's answer
for the pod's. So a probe that connects also asks the kernel which socket listens there
(``/proc/net/tcp``, ``/proc/net/tcp6``) and whether one of the pod's processes holds it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Iterator
from pathlib import Path

_LISTEN = "0A"
_ANY_V4 = "00000000"
_ANY_V6 = "0" * 32
_V4_MAPPED = "0000000000000000FFFF0000"
"""How ``/proc/net/tcp6`` begins ``::ffff:a.b.c.d``, an IPv4 address an IPv6 socket listens at
(as gRPC's servers bind an IPv4 address); the IPv4 address follows as ``/proc/net/tcp`` has it."""


def _local_v4(host: str, port: int) -> str:
    """An IPv4 address and port as ``/proc/net/tcp`` writes them (host byte order)."""
    packed = int.from_bytes(socket.inet_aton(host), "little")
    return f"{packed:08X}:{port:04X}"


def _socket_rows() -> Iterator[list[str]]:
    """Every TCP socket the kernel lists, IPv4's then IPv6's, as the fields of its row."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            yield line.split()


def listening_socket(host: str, port: int) -> int | None:
    """The inode of the socket a connection to ``host:port`` reaches: one listening at that
    address (an IPv4 or an IPv6 socket), else one listening at every address (IPv4's, or
    IPv6's, which takes IPv4 too); None when nothing listens there."""
    exact, any_v4 = _local_v4(host, port), f"{_ANY_V4}:{port:04X}"
    any_v6, mapped = f"{_ANY_V6}:{port:04X}", _V4_MAPPED + _local_v4(host, port)
    wildcard: int | None = None
    for fields in _socket_rows():
        if len(fields) < 10 or fields[3] != _LISTEN:
            continue
        if fields[1] in (exact, mapped):
            return int(fields[9])
        if fields[1] in (any_v4, any_v6):
            wildcard = int(fields[9])
    return wildcard


def addresses_with_sockets(prefix: str) -> set[str]:
    """The IPv4 addresses starting with ``prefix`` that the kernel has a TCP socket at, in
    any state (listening, connected, or closed and waiting out TIME_WAIT), IPv4's or IPv6's
    bound as ``::ffff:a.b.c.d``."""
    found: set[str] = set()
    for fields in _socket_rows():
        if len(fields) < 2:
            continue
        local = fields[1].split(":", 1)[0]
        if len(local) == 32:
            if not local.startswith(_V4_MAPPED):
                continue
            local = local[len(_V4_MAPPED) :]
        address = socket.inet_ntoa(int(local, 16).to_bytes(4, "little"))
        if address.startswith(prefix):
            found.add(address)
    return found


def with_descendants(pids: Iterable[int]) -> set[int]:
    """``pids`` and every process they started, and those started in turn."""
    found: set[int] = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
            except OSError:
                continue
            todo.extend(int(child) for child in children)
    return found


def holder_among(inode: int, pids: Iterable[int]) -> int | None:
    """The process of ``pids`` (or one they started) that holds socket ``inode``, if any."""
    wanted = f"socket:[{inode}]"
    for pid in sorted(with_descendants(pids)):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                    return pid
            except OSError:
                continue
    return None

"""gunicorn's response writes with one ``send`` each (``app.web.socket_writes``)."""

from __future__ import annotations

import socket

import gunicorn.util

from app.web import socket_writes


class _ShortSends:
    """A socket whose ``send`` takes at most ``limit`` bytes, as a full send buffer does."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.sends: list[bytes] = []
        self.sendalls: list[bytes] = []

    def send(self, data: bytes) -> int:
        taken = bytes(data[: self.limit])
        self.sends.append(taken)
        return len(taken)

    def sendall(self, data: memoryview) -> None:
        self.sendalls.append(bytes(data))


def test_a_small_write_is_one_send() -> None:
    sock = _ShortSends(limit=1 << 20)
    socket_writes.write(sock, b"data: hello\n\n")
    assert sock.sends == [b"data: hello\n\n"]
    assert sock.sendalls == []


def test_what_the_kernel_did_not_take_goes_on_with_sendall() -> None:
    sock = _ShortSends(limit=4)
    socket_writes.write(sock, b"0123456789")
    assert sock.sends == [b"0123"]
    assert sock.sendalls == [b"456789"]


def test_chunked_writes_are_framed_as_gunicorn_frames_them() -> None:
    ours, theirs = socket.socketpair()
    try:
        socket_writes.write(ours, b"x" * 300, chunked=True)
        gunicorn.util.write_chunk(ours, b"x" * 300)
        expected = b"12C\r\n" + b"x" * 300 + b"\r\n"
        received = b""
        while len(received) < 2 * len(expected):
            received += theirs.recv(4096)
        assert received == expected * 2
    finally:
        ours.close()
        theirs.close()


def test_install_replaces_gunicorns_write() -> None:
    original = gunicorn.util.write
    try:
        socket_writes.install()
        assert gunicorn.util.write is socket_writes.write
    finally:
        gunicorn.util.write = original

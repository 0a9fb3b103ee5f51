"""Response writes with one system call each, for gunicorn's gevent worker.

gevent's ``sendall`` asks the kernel for the socket's send buffer size before every write
(a ``getsockopt`` call, to size the chunks of large writes). An event stream is all small
writes, and one broadcast makes thousands of them: that question was a third of the
system calls a worker made delivering events. A small write needs one ``send``; only what
the kernel did not take goes on through ``sendall``.
"""

from __future__ import annotations

from typing import Any


def write(sock: Any, data: bytes, chunked: bool = False) -> None:
    """gunicorn's ``util.write``: ``data`` whole, as one HTTP chunk when ``chunked``."""
    if chunked:
        data = b"%X\r\n%s\r\n" % (len(data), data)
    sent = sock.send(data)
    if sent < len(data):
        sock.sendall(memoryview(data)[sent:])


def install() -> None:
    """Make gunicorn's response and header writes use ``write`` (its modules look the
    function up on ``gunicorn.util`` at each call)."""
    from gunicorn import util

    util.write = write

"""The latency benchmark's HTTP/1.1 client: requests in one write on one kept-alive
connection, bodies read by length or chunked, a closed connection replaced."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.rawhttp import KeepAliveConnection
from devstack.serving import ServerThread


def _app(environ: dict[str, Any], start_response: Any) -> Any:
    """``/sized`` answers with a length, ``/streamed`` in chunks, ``/echo`` its body and
    ``/last`` asks to close the connection; every answer names the client's port."""
    path = environ["PATH_INFO"]
    port = str(environ["REMOTE_PORT"])
    if path == "/streamed":
        start_response("200 OK", [("Content-Type", "text/plain"), ("X-Port", port)])
        return iter([b"first ", b"second ", b"third"])
    if path == "/echo":
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    else:
        body = b"sized body"
    headers = [("Content-Length", str(len(body))), ("X-Port", port)]
    if path == "/last":
        headers.append(("Connection", "close"))
    start_response("200 OK", headers)
    return [body]


@pytest.fixture
def server() -> Iterator[ServerThread]:
    with ServerThread(_app) as running:
        yield running


def test_requests_share_one_connection_and_bodies_are_read_whole(server: ServerThread) -> None:
    connection = KeepAliveConnection("127.0.0.1", server.port)
    try:
        sized = connection.request("GET", "/sized", {})
        assert (sized.status, sized.read()) == (200, b"sized body")
        streamed = connection.request("GET", "/streamed", {})
        assert streamed.headers["transfer-encoding"] == "chunked"
        assert list(streamed.chunks()) == [b"first ", b"second ", b"third"]
        echoed = connection.request("POST", "/echo", {"X-Test": "1"}, b'{"a": 1}')
        assert echoed.read() == b'{"a": 1}'
        ports = {sized.headers["x-port"], streamed.headers["x-port"], echoed.headers["x-port"]}
        assert len(ports) == 1
    finally:
        connection.close()


def test_a_connection_the_server_closes_is_replaced(server: ServerThread) -> None:
    connection = KeepAliveConnection("127.0.0.1", server.port)
    try:
        last = connection.request("GET", "/last", {})
        assert last.read() == b"sized body"
        after = connection.request("GET", "/sized", {})
        assert after.read() == b"sized body"
        assert after.headers["x-port"] != last.headers["x-port"]
    finally:
        connection.close()

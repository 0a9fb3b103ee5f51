"""The emulators' HTTP server keeps connections alive, as real API servers do."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.serving import ServerThread


def _app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
    """Echoes the request; ``/stream`` answers without a length, ``/ignore`` reads nothing."""
    path = environ["PATH_INFO"]
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return iter([b"one ", b"two ", b"three"])
    body = b""
    if path != "/ignore":
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    payload = json.dumps(
        {"method": environ["REQUEST_METHOD"], "path": path, "body": body.decode()}
    ).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
    )
    return iter([payload])


@pytest.fixture
def server() -> Iterator[ServerThread]:
    with ServerThread(_app) as running:
        yield running


def _connection(server: ServerThread) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)


def test_requests_share_one_connection(server: ServerThread) -> None:
    connection = _connection(server)
    answers = []
    for index in range(3):
        connection.request("POST", f"/n{index}", body=f"body {index}")
        response = connection.getresponse()
        assert response.getheader("Connection") is None
        answers.append(json.loads(response.read()))
        sock = connection.sock
        assert sock is not None
        if index == 0:
            first = sock
        # The same socket every time: http.client reconnects only if the server closed it.
        assert sock is first
    assert [a["body"] for a in answers] == ["body 0", "body 1", "body 2"]


def test_an_unread_body_is_drained_before_the_next_request(server: ServerThread) -> None:
    connection = _connection(server)
    connection.request("POST", "/ignore", body="x" * 10_000)
    assert json.loads(connection.getresponse().read())["path"] == "/ignore"
    connection.request("GET", "/after")
    assert json.loads(connection.getresponse().read()) == {
        "method": "GET",
        "path": "/after",
        "body": "",
    }


def test_unsized_responses_are_chunked_and_the_connection_survives(
    server: ServerThread,
) -> None:
    connection = _connection(server)
    connection.request("GET", "/stream")
    response = connection.getresponse()
    assert response.getheader("Transfer-Encoding") == "chunked"
    assert response.read() == b"one two three"
    connection.request("GET", "/next")
    assert json.loads(connection.getresponse().read())["path"] == "/next"


def test_a_client_asking_to_close_gets_its_connection_closed(server: ServerThread) -> None:
    connection = _connection(server)
    connection.request("GET", "/bye", headers={"Connection": "close"})
    response = connection.getresponse()
    assert response.getheader("Connection") == "close"
    response.read()
    assert response.will_close


def test_stopping_ends_kept_alive_connections(server: ServerThread) -> None:
    connection = _connection(server)
    connection.request("GET", "/first")
    connection.getresponse().read()
    server.stop()
    # A stopped emulator must look unreachable, not keep answering on an old connection.
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        connection.request("GET", "/second")
        connection.getresponse().read()

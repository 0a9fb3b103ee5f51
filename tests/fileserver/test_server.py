"""The file server as its image runs it: the real program on a free port, with temporary
directories as its mounts, driven by a real WebDAV client (webdav4) and, where the exact bytes
matter, by a raw socket."""

from __future__ import annotations

import contextlib
import io
import re
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from webdav4.client import Client, ForbiddenOperation, HTTPError

from tests.fileserver.server_process import PREFIX, FileServerProcess

pytestmark = pytest.mark.slow

TOKEN = "gt-fileserverTestToken00001.secretPartOfTheToken01"
QUERY_TOKEN = "query-token-never-logged"
COOKIE_TOKEN = "cookie-token-never-logged"

_REQUEST_LINE = re.compile(r" fileserver\.access: [A-Z]+ /\S* \d{3} \d+\.\d{3}s$")
"""A request's line: method, path, status, seconds."""


def _mounts(root: Path) -> tuple[Path, Path]:
    home, shared = root / "home", root / "shared"
    home.mkdir()
    shared.mkdir()
    (shared / "readme.txt").write_text("read me\n")
    return home, shared


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FileServerProcess]:
    """One server for the tests that only make requests."""
    root = tmp_path_factory.mktemp("fileserver")
    running = FileServerProcess(*_mounts(root))
    yield running
    running.kill()


@contextlib.contextmanager
def webdav(url: str, **options: Any) -> Iterator[Client]:
    """A WebDAV client on ``url``, its connections closed at the end."""
    client = Client(url, retry=False, **options)
    try:
        yield client
    finally:
        client.http.close()


@pytest.fixture
def client(server: FileServerProcess) -> Iterator[Client]:
    with webdav(server.url) as opened:
        yield opened


def _refused(call: pytest.ExceptionInfo[HTTPError]) -> int:
    """The status of the error the client raised."""
    return call.value.status_code


def _names(client: Client, path: str) -> set[str]:
    return {str(entry).rstrip("/").rsplit("/", 1)[-1] for entry in client.ls(path, detail=False)}


def test_the_prefix_lists_the_mounts(client: Client) -> None:
    entries = client.ls("", detail=True)
    assert {(e["name"], e["type"]) for e in entries if isinstance(e, dict)} == {
        ("home", "directory"),
        ("shared", "directory"),
    }


def test_a_file_is_uploaded_listed_downloaded_renamed_and_deleted(
    client: Client, server: FileServerProcess
) -> None:
    data = b"first line\n" + bytes(range(256)) * 64
    client.upload_fileobj(io.BytesIO(data), "home/notes.bin")
    assert (server.home / "notes.bin").read_bytes() == data
    assert "notes.bin" in _names(client, "home")

    downloaded = io.BytesIO()
    client.download_fileobj("home/notes.bin", downloaded)
    assert downloaded.getvalue() == data

    client.move("home/notes.bin", "home/renamed.bin")
    assert not (server.home / "notes.bin").exists()
    assert (server.home / "renamed.bin").read_bytes() == data

    client.remove("home/renamed.bin")
    assert not (server.home / "renamed.bin").exists()
    assert not client.exists("home/renamed.bin")


def test_the_read_only_mount_is_read_and_refuses_writes(
    client: Client, server: FileServerProcess
) -> None:
    downloaded = io.BytesIO()
    client.download_fileobj("shared/readme.txt", downloaded)
    assert downloaded.getvalue() == b"read me\n"

    with pytest.raises(HTTPError) as upload:
        client.upload_fileobj(io.BytesIO(b"x"), "shared/new.txt")
    with pytest.raises(HTTPError) as overwrite:
        client.upload_fileobj(io.BytesIO(b"x"), "shared/readme.txt", overwrite=True)
    with pytest.raises(HTTPError) as delete:
        client.remove("shared/readme.txt")
    assert [_refused(upload), _refused(overwrite), _refused(delete)] == [403, 403, 403]
    assert sorted(p.name for p in server.shared.iterdir()) == ["readme.txt"]
    assert (server.shared / "readme.txt").read_text() == "read me\n"


def test_the_mounts_themselves_cannot_be_deleted(client: Client, server: FileServerProcess) -> None:
    (server.home / "kept.txt").write_text("kept")
    with pytest.raises(HTTPError) as mount:
        client.remove("home")
    with pytest.raises(HTTPError) as listing:
        client.remove("")
    assert [_refused(mount), _refused(listing)] == [403, 403]
    assert (server.home / "kept.txt").read_text() == "kept"


def test_symlinks_out_of_a_mount_are_refused_and_those_inside_work(
    client: Client, server: FileServerProcess, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    links = server.home / "links"
    (links / "docs").mkdir(parents=True)
    (links / "docs" / "a.txt").write_text("inside")
    (links / "docs-link").symlink_to(links / "docs")
    (links / "a-link.txt").symlink_to("docs/a.txt")
    (links / "escape").symlink_to(outside)
    (links / "escape.txt").symlink_to(outside / "secret.txt")
    (links / "into-shared").symlink_to(server.shared)

    assert _names(client, "home/links") == {"docs", "docs-link", "a-link.txt"}
    inside = io.BytesIO()
    client.download_fileobj("home/links/a-link.txt", inside)
    assert inside.getvalue() == b"inside"
    assert _names(client, "home/links/docs-link") == {"a.txt"}
    client.upload_fileobj(io.BytesIO(b"through"), "home/links/docs-link/b.txt")
    assert (links / "docs" / "b.txt").read_bytes() == b"through"

    refused = []
    for read in ("home/links/escape.txt", "home/links/escape/secret.txt"):
        with pytest.raises(HTTPError) as call:
            client.download_fileobj(read, io.BytesIO())
        refused.append(_refused(call))
    with pytest.raises(HTTPError) as listing:
        client.ls("home/links/escape")
    refused.append(_refused(listing))
    for write in ("home/links/escape.txt", "home/links/escape/planted.txt"):
        with pytest.raises(HTTPError) as call:
            client.upload_fileobj(io.BytesIO(b"planted"), write, overwrite=True)
        refused.append(_refused(call))
    with pytest.raises(HTTPError) as into_read_only:
        client.upload_fileobj(io.BytesIO(b"x"), "home/links/into-shared/readme.txt", overwrite=True)
    refused.append(_refused(into_read_only))
    with pytest.raises(ForbiddenOperation) as move_out:
        client.move("home/links/docs/a.txt", "home/links/escape/a.txt")
    assert isinstance(move_out.value.__cause__, HTTPError)
    refused.append(move_out.value.__cause__.status_code)

    assert refused == [403] * len(refused)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret"
    assert (server.shared / "readme.txt").read_text() == "read me\n"
    assert (links / "docs" / "a.txt").read_text() == "inside"


def test_paths_outside_the_prefix_answer_404(client: Client, server: FileServerProcess) -> None:
    for path in ("/", "/files/", "/files/someone-else/home/"):
        response = client.http.request("PROPFIND", f"http://127.0.0.1:{server.port}{path}")
        assert (path, response.status_code) == (path, 404)


def _put_waiting_for_its_body(port: int, body_length: int) -> socket.socket:
    """A PUT whose headers the server has read and answered with 100 Continue: a request in
    flight until its body is sent."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        f"PUT {PREFIX}/home/in-flight.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Length: {body_length}\r\nExpect: 100-continue\r\n\r\n".encode()
    )
    assert sock.recv(1024).startswith(b"HTTP/1.1 100 Continue")
    return sock


def test_sigterm_ends_the_requests_in_flight_then_exits_and_the_log_holds_no_token(
    tmp_path: Path,
) -> None:
    server = FileServerProcess(*_mounts(tmp_path))
    try:
        with webdav(
            server.url,
            headers={"Authorization": f"Bearer {TOKEN}"},
            cookies={"gafaelfawr": COOKIE_TOKEN},
        ) as client:
            client.upload_fileobj(io.BytesIO(b"hello"), "home/hello.txt")
            response = client.http.get(f"{server.url}/home/hello.txt?token={QUERY_TOKEN}")
            assert (response.status_code, response.content) == (200, b"hello")
            client.ls("")

            body = b"written after SIGTERM"
            with _put_waiting_for_its_body(server.port, len(body)) as put:
                # The client's connection stays open and idle: it must not hold the exit up.
                server.process.send_signal(signal.SIGTERM)
                server.wait_for_log("SIGTERM: stopping")
                put.sendall(body)
                assert put.recv(1024).startswith(b"HTTP/1.1 201 ")
            signalled = time.monotonic()
            assert server.wait_for_exit(timeout=5) == 0
            assert time.monotonic() - signalled < 5
    finally:
        server.kill()

    assert (tmp_path / "home" / "in-flight.txt").read_bytes() == body
    log = server.log
    request_lines = [line for line in log.splitlines() if " fileserver.access: " in line]
    assert all(_REQUEST_LINE.search(line) for line in request_lines), log
    for line in (
        f"PUT {PREFIX}/home/hello.txt 201 ",
        f"GET {PREFIX}/home/hello.txt 200 ",
        f"PROPFIND {PREFIX} 207 ",
        f"PUT {PREFIX}/home/in-flight.txt 201 ",
    ):
        assert any(line in request for request in request_lines), log
    for secret in (TOKEN, QUERY_TOKEN, COOKIE_TOKEN, "token=", "Bearer"):
        assert secret not in log


def test_it_exits_by_itself_after_the_idle_timeout(tmp_path: Path) -> None:
    server = FileServerProcess(*_mounts(tmp_path), idle_timeout=1)
    try:
        with webdav(server.url) as client:
            assert _names(client, "") == {"home", "shared"}
        answered = time.monotonic()
        assert server.wait_for_exit(timeout=10) == 0
        # Not at once: the timeout runs from the end of the last request.
        assert time.monotonic() - answered > 0.5
    finally:
        server.kill()
    assert "no request for 1s: stopping" in server.log


def test_an_upload_cut_off_leaves_the_file_as_it_was(
    client: Client, server: FileServerProcess
) -> None:
    """A PUT whose connection drops before its body has arrived replaces nothing (wsgidav
    alone would leave the file truncated); a complete one replaces it, keeping its mode."""
    original = b"the first version\n" * 100
    client.upload_fileobj(io.BytesIO(original), "home/draft.txt")
    (server.home / "draft.txt").chmod(0o640)

    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(
        f"PUT {PREFIX}/home/draft.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Length: {len(original) * 2}\r\n\r\n".encode()
        + b"half of a new version"
    )
    sock.close()
    server.wait_for_log(f"PUT {PREFIX}/home/draft.txt 400 ")
    assert (server.home / "draft.txt").read_bytes() == original
    assert not [p.name for p in server.home.iterdir() if p.name.endswith(".upload")]

    replaced = b"the second version\n"
    client.upload_fileobj(io.BytesIO(replaced), "home/draft.txt", overwrite=True)
    assert (server.home / "draft.txt").read_bytes() == replaced
    assert (server.home / "draft.txt").stat().st_mode & 0o777 == 0o640
    assert not [p.name for p in server.home.iterdir() if p.name.endswith(".upload")]

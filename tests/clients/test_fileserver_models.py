"""The client's views of the file-server answers (pure, no network): ``GET /files`` in JSON
and ``GET /fileserver/v1/user-status``, as nublado's routes shape them."""

from __future__ import annotations

import pytest
from labspawner import FileServer, FileServerMount, FileServerStatus

BASE = "https://data.example.org"
DESCRIPTION = {
    "username": "rachel",
    "url": f"{BASE}/files/rachel/",
    "running": True,
    "mounts": [
        {"name": "home", "path": "/home", "readOnly": False, "url": f"{BASE}/files/rachel/home/"},
        {
            "name": "datasets-rubin",
            "path": "/datasets/rubin",
            "readOnly": True,
            "url": f"{BASE}/files/rachel/datasets-rubin/",
        },
    ],
}


def test_a_description_reads_every_mount_in_order() -> None:
    server = FileServer.from_json(DESCRIPTION)
    assert server.username == "rachel"
    assert server.url == f"{BASE}/files/rachel/"
    assert server.running is True
    assert server.mounts == [
        FileServerMount("home", "/home", False, f"{BASE}/files/rachel/home/"),
        FileServerMount(
            "datasets-rubin", "/datasets/rubin", True, f"{BASE}/files/rachel/datasets-rubin/"
        ),
    ]
    # Each mount's URL lies under the server's, where a client mounting the server finds it.
    assert all(m.url.startswith(server.url) for m in server.mounts)


def test_a_description_without_mounts_has_none() -> None:
    assert FileServer.from_json({**DESCRIPTION, "mounts": []}).mounts == []
    without = {key: value for key, value in DESCRIPTION.items() if key != "mounts"}
    assert FileServer.from_json(without).mounts == []


@pytest.mark.parametrize("key", ["username", "url", "running"])
def test_a_description_missing_a_required_key_is_refused(key: str) -> None:
    broken = {name: value for name, value in DESCRIPTION.items() if name != key}
    with pytest.raises(KeyError, match=key):
        FileServer.from_json(broken)


def test_a_mount_is_read_by_the_contracts_camel_case_key() -> None:
    mount = {"name": "home", "path": "/home", "read_only": True, "url": f"{BASE}/files/r/home/"}
    with pytest.raises(KeyError, match="readOnly"):
        FileServerMount.from_json(mount)


def test_the_status_alone_as_nublado_answers_it_and_with_the_user_and_url() -> None:
    assert FileServerStatus.from_json({"running": True}) == FileServerStatus(True, None, None)
    assert FileServerStatus.from_json({"running": False}).running is False
    full = FileServerStatus.from_json(
        {"running": True, "username": "rachel", "url": f"{BASE}/files/rachel/"}
    )
    assert (full.username, full.url) == ("rachel", f"{BASE}/files/rachel/")

"""The Python client's file-server calls against the service on the local stack: a user
starts theirs, reads whether it runs, and stops it; a token without the scope is told so.
(That the server it starts really serves is ``tests/fileservers/test_real_fileservers``'s.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from labspawner import FileServer, LabSpawnerClient, PermissionDeniedError

from devstack.stack import LocalStack

USER = "rachel"


@pytest.fixture
def rachel(stack: LocalStack, stack_tokens: dict[str, str]) -> Iterator[LabSpawnerClient]:
    client = LabSpawnerClient(stack.spawner_url, stack_tokens[USER])
    client.stop_file_server(wait=True)
    yield client
    client.stop_file_server(wait=True)
    client.close()


def test_a_user_starts_reads_and_stops_their_file_server(
    stack: LocalStack, rachel: LabSpawnerClient
) -> None:
    assert rachel.file_server() is None
    assert rachel.stop_file_server() is False

    server = rachel.start_file_server()
    url = f"{stack.state()['ingress_url']}/files/{USER}/"
    assert isinstance(server, FileServer)
    assert (server.username, server.url, server.running) == (USER, url, True)
    assert [(m.name, m.path, m.read_only, m.url) for m in server.mounts] == [
        ("home", "/home", False, f"{url}home/")
    ]
    # Asked again while it runs: the same server, at once.
    assert rachel.start_file_server() == server
    status = rachel.file_server()
    assert status is not None
    assert (status.running, status.username, status.url) == (True, USER, url)

    assert rachel.stop_file_server(wait=True) is True
    assert rachel.file_server() is None


def test_a_token_without_the_scope_is_told_so(
    stack: LocalStack, stack_tokens: dict[str, str]
) -> None:
    client = LabSpawnerClient(stack.spawner_url, stack_tokens["rachel-readonly"])
    with client, pytest.raises(PermissionDeniedError, match="write:files"):
        client.start_file_server()

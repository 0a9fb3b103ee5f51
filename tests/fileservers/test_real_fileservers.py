"""A user's file server that really runs, reached through the local stack's ingress as a
WebDAV client on a laptop reaches it.

On the stack ``make run`` starts, the file-server image is the repository's WebDAV server, a
process on its pod's address whose ``home`` mount is the users' homes on the nodes' shared
files (where their labs' homes are). A user starts it with the Python client and their own
token; a WebDAV client (webdav4) then works on their files with the token as its Basic
password. The ingress, from the GafaelfawrIngress the service made, admits that user alone
and only with the scope; the server follows no link out of its tree; and it stops by itself
when idle, after which the service removes its objects.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from labspawner import LabSpawnerClient
from webdav4.client import Client as WebdavClient

from devstack.stack import LocalStack
from tests.conftest import FILESERVER_IDLE_SECONDS
from tests.labs.conftest import wait_for

pytestmark = pytest.mark.slow

USER = "rachel"


@pytest.fixture
def tokens(real_lab_stack: LocalStack) -> dict[str, str]:
    return {name: entry["token"] for name, entry in real_lab_stack.state()["tokens"].items()}


@pytest.fixture
def rachel(real_lab_stack: LocalStack, tokens: dict[str, str]) -> Iterator[LabSpawnerClient]:
    client = LabSpawnerClient(real_lab_stack.spawner_url, tokens[USER])
    yield client
    client.stop_file_server(wait=True)
    client.close()


@pytest.fixture
def home(real_lab_stack: LocalStack) -> Path:
    """Rachel's home on the nodes' shared files: her lab's home, and her server's."""
    return real_lab_stack.node_files / "srv" / "home" / USER


def _webdav(url: str, token: str) -> WebdavClient:
    return WebdavClient(url, auth=(USER, token), timeout=30)


def _names(client: WebdavClient, path: str) -> set[str]:
    return {str(e["name"]).rstrip("/").rsplit("/", 1)[-1] for e in client.ls(path, detail=True)}  # type: ignore[index]


def test_a_user_works_on_their_files_over_webdav_through_the_ingress(
    real_lab_stack: LocalStack, tokens: dict[str, str], rachel: LabSpawnerClient, home: Path
) -> None:
    server = rachel.start_file_server()
    ingress = real_lab_stack.state()["ingress_url"]
    assert server.url == f"{ingress}/files/{USER}/"
    assert [(m.name, m.path, m.read_only) for m in server.mounts] == [("home", "/home", False)]
    status = rachel.file_server()
    assert status is not None and status.running

    dav = _webdav(server.url, tokens[USER])
    assert "home" in _names(dav, "")
    data = b"measured on the telescope\n" * 1000
    dav.upload_fileobj(io.BytesIO(data), f"home/{USER}/run-42.txt")
    assert (home / "run-42.txt").read_bytes() == data  # where the lab sees it
    assert "run-42.txt" in _names(dav, f"home/{USER}")
    back = io.BytesIO()
    dav.download_fileobj(f"home/{USER}/run-42.txt", back)
    assert back.getvalue() == data
    dav.move(f"home/{USER}/run-42.txt", f"home/{USER}/run-42-final.txt")
    assert not (home / "run-42.txt").exists()
    assert (home / "run-42-final.txt").read_bytes() == data
    dav.remove(f"home/{USER}/run-42-final.txt")
    assert not (home / "run-42-final.txt").exists()

    # A file the lab wrote is there to download.
    (home / "from-the-lab.txt").write_text("written in a notebook")
    with dav.open(f"home/{USER}/from-the-lab.txt", mode="r") as written:
        assert written.read() == "written in a notebook"
    (home / "from-the-lab.txt").unlink()

    # The administrators' routes see it, and stop it: its process and route go.
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    spawner = real_lab_stack.spawner_url
    assert USER in requests.get(f"{spawner}/fileserver/v1/users", headers=admin, timeout=10).json()
    stopped = requests.delete(f"{spawner}/fileserver/v1/users/{USER}", headers=admin, timeout=60)
    assert stopped.status_code == 204
    assert rachel.file_server() is None
    answer = requests.get(server.url, auth=(USER, tokens[USER]), timeout=10)
    assert answer.status_code in (404, 502, 503), answer.status_code


def test_the_ingress_admits_that_user_alone_and_with_the_scope(
    real_lab_stack: LocalStack, tokens: dict[str, str], rachel: LabSpawnerClient
) -> None:
    url = rachel.start_file_server().url
    # No credentials: a Basic challenge, as WebDAV clients expect.
    anonymous = requests.request("PROPFIND", url, headers={"Depth": "0"}, timeout=10)
    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"].startswith("Basic")
    # Another user's token, with the scope: refused.
    wile = requests.request(
        "PROPFIND", url, headers={"Depth": "0"}, auth=("wile", tokens["wile"]), timeout=10
    )
    assert wile.status_code == 403
    # Her own token without the scope: refused.
    readonly = requests.request(
        "PROPFIND",
        url,
        headers={"Depth": "0"},
        auth=(USER, tokens["rachel-readonly"]),
        timeout=10,
    )
    assert readonly.status_code == 403
    # Her token, which the server never sees.
    mine = requests.request(
        "PROPFIND", url, headers={"Depth": "0"}, auth=(USER, tokens[USER]), timeout=10
    )
    assert mine.status_code == 207
    pod_log = _server_log(real_lab_stack)
    assert "PROPFIND" in pod_log and tokens[USER] not in pod_log


def test_no_link_leads_out_of_the_tree(
    tokens: dict[str, str], rachel: LabSpawnerClient, home: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("not hers to serve")
    (home / "escape.txt").symlink_to(outside)
    (home / "inside.txt").write_text("hers")
    (home / "alias.txt").symlink_to(home / "inside.txt")
    try:
        url = rachel.start_file_server().url
        auth = (USER, tokens[USER])
        refused = requests.get(f"{url}home/{USER}/escape.txt", auth=auth, timeout=10)
        assert refused.status_code == 403
        followed = requests.get(f"{url}home/{USER}/alias.txt", auth=auth, timeout=10)
        assert (followed.status_code, followed.text) == (200, "hers")
        names = _names(_webdav(url, tokens[USER]), f"home/{USER}")
        assert "escape.txt" not in names and "alias.txt" in names
    finally:
        for name in ("escape.txt", "inside.txt", "alias.txt"):
            (home / name).unlink(missing_ok=True)


def test_an_idle_server_stops_by_itself_and_its_objects_go(
    real_lab_stack: LocalStack, tokens: dict[str, str], rachel: LabSpawnerClient
) -> None:
    url = rachel.start_file_server().url
    store = real_lab_stack.kube.store
    assert store.get("jobs", "fileservers", f"{USER}-fs") is not None
    # Nothing asks it anything now: after its idle timeout it exits, its Job completes, and
    # the service removes the rest.
    wait_for(lambda: rachel.file_server() is None, timeout=FILESERVER_IDLE_SECONDS + 30)
    for resource in ("jobs", "services", "networkpolicies", "gafaelfawringresses"):
        assert store.get(resource, "fileservers", f"{USER}-fs") is None, resource
    assert any("stopped by itself" in data for data in _events(real_lab_stack, tokens[USER]))
    gone = requests.get(url, auth=(USER, tokens[USER]), timeout=10)
    assert gone.status_code in (404, 502, 503)
    # Opened again, it starts anew.
    assert rachel.start_file_server().running


def _server_log(stack: LocalStack) -> str:
    """The user's file-server pod's log, as the API serves it."""
    (pod,) = [
        p
        for p in stack.kube.store.list("pods", "fileservers")
        if p["metadata"]["labels"].get("lab-spawner.jupyter.org/user") == USER
    ]
    name = pod["metadata"]["name"]
    url = f"{stack.kube.url}/api/v1/namespaces/fileservers/pods/{name}/log"
    return requests.get(url, timeout=10).text


def _events(stack: LocalStack, token: str) -> list[str]:
    """The data of the events of the user's file server's last operation."""
    with requests.get(
        f"{stack.spawner_url}/spawner/v1/fileservers/{USER}/events",
        headers={"Authorization": f"Bearer {token}"},
        stream=True,
        timeout=30,
    ) as answer:
        assert answer.status_code == 200
        text = "".join(answer.iter_content(decode_unicode=True))
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]

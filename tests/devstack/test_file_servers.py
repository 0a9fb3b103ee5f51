"""A user's file server on the local stack: the file-server image runs the repository's WebDAV
server as a process (``devstack/images/fileserver.py``), its home volume is the host path the
labs mount (the nodes' shared file system), and the ingress proxy serves it behind the Gafaelfawr
emulator with Basic authentication, as davfs2 and Finder send the token.

The objects are those the contract gives the service's ``fileserver`` kind (a Job, a Service and
a GafaelfawrIngress named ``<user>-fs``), created here directly: no service runs.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import requests
from requests.auth import HTTPBasicAuth

from devstack.demo import FILES_SCOPE, demo_group_mapping, demo_tokens, demo_users
from devstack.gafaelfawr import GafaelfawrEmulator
from devstack.homes import home_host_path, provision_homes
from devstack.images import DEFAULT_PROGRAMS, load_programs
from devstack.ingress import IngressProxy
from devstack.kube import KubernetesEmulator
from devstack.kube.cluster import ClusterSettings
from devstack.kube.cluster.programs import ImageProgram, program_for
from devstack.kube.crds import crd
from devstack.stack import LocalStack, StackOptions
from tests.labs.conftest import wait_for

NAMESPACE = "fileservers"
GROUP, VERSION, PLURAL = "gafaelfawr.lsst.io", "v1alpha1", "gafaelfawringresses"
IMAGE = "registry.test/lsstsqre/fileserver:1.0"
PROBE_IMAGE = "registry.test/probe:1"
PORT = 8000
MEBIBYTE = 1024 * 1024


@dataclass
class FileServers:
    """A cluster whose nodes share ``node_files``, with Gafaelfawr and the ingress proxy."""

    kube: KubernetesEmulator
    proxy: IngressProxy
    core: kubernetes.client.CoreV1Api
    batch: kubernetes.client.BatchV1Api
    objects: kubernetes.client.CustomObjectsApi
    node_files: Path

    def home(self, user: str) -> Path:
        return self.node_files / "srv" / "home" / user

    def url(self, path: str) -> str:
        return self.proxy.url + path

    def dav(
        self,
        method: str,
        path: str,
        caller: str | None = "rachel",
        timeout: float = 30,
        **kwargs: Any,
    ) -> requests.Response:
        """A WebDAV request through the proxy, the demo token named ``caller`` sent as the
        Basic password with its user's name (davfs2's way); None for no credentials."""
        auth = None
        if caller is not None:
            spec = demo_tokens()[caller]
            auth = HTTPBasicAuth(spec.username, spec.token)
        return requests.request(method, self.url(path), auth=auth, timeout=timeout, **kwargs)

    def start(self, user: str, idle_timeout: int = 600) -> None:
        """The user's file server, as the service's ``fileserver`` kind makes it."""
        name = f"{user}-fs"
        labels = {
            "app.kubernetes.io/managed-by": "lab-spawner",
            "app.kubernetes.io/component": "fileserver",
            "lab-spawner.jupyter.org/user": user,
        }
        mounts = [
            {"name": "home", "path": "/home", "readOnly": False},
            {"name": "shared", "path": "/shared", "readOnly": True},
        ]
        env = {
            "FILESERVER_USER": user,
            "FILESERVER_MOUNTS": json.dumps(mounts),
            "FILESERVER_URL_PREFIX": f"/files/{user}",
            "FILESERVER_PORT": str(PORT),
            "FILESERVER_IDLE_TIMEOUT": str(idle_timeout),
        }
        container = {
            "name": "fileserver",
            "image": IMAGE,
            "env": [{"name": k, "value": v} for k, v in env.items()],
            "ports": [{"name": "http", "containerPort": PORT}],
            "readinessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 1},
            "securityContext": {"readOnlyRootFilesystem": True, "runAsNonRoot": True},
            "volumeMounts": [
                {"name": "home", "mountPath": "/home"},
                {"name": "shared", "mountPath": "/shared", "readOnly": True},
            ],
        }
        pod_spec = {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [container],
            "volumes": [
                {"name": "home", "hostPath": {"path": "/srv/home"}},
                {"name": "shared", "hostPath": {"path": "/srv/shared"}},
            ],
        }
        job = {
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "backoffLimit": 0,
                "ttlSecondsAfterFinished": 300,
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        }
        self.batch.create_namespaced_job(NAMESPACE, job)
        service = {"selector": labels, "ports": [{"port": PORT, "targetPort": "http"}]}
        self.core.create_namespaced_service(
            NAMESPACE, {"metadata": {"name": name, "labels": labels}, "spec": service}
        )
        backend = {"service": {"name": name, "port": {"number": PORT}}}
        path = {"path": f"/files/{user}", "pathType": "Prefix", "backend": backend}
        ingress = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "GafaelfawrIngress",
            "metadata": {"name": name, "labels": labels},
            # allowOptions: WebDAV clients negotiate with a plain OPTIONS, which Gafaelfawr
            # refuses otherwise. No baseUrl: the CRD takes https URLs only (Gafaelfawr ignores
            # the field) and the stack's ingress is http on an address; nor a rule host.
            "config": {
                "scopes": {"all": [FILES_SCOPE]},
                "username": user,
                "authType": "basic",
                "allowOptions": True,
                "loginRedirect": False,
            },
            "template": {
                "metadata": {"name": name, "labels": labels},
                "spec": {"rules": [{"http": {"paths": [path]}}]},
            },
        }
        self.objects.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, ingress)

    def pod_of(self, user: str) -> Any:
        pods = self.core.list_namespaced_pod(NAMESPACE, label_selector=f"job-name={user}-fs")
        return pods.items[0] if pods.items else None


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FileServers]:
    node_files = tmp_path_factory.mktemp("node-files")
    programs = {
        **load_programs(DEFAULT_PROGRAMS),
        "registry.test/probe": ImageProgram(entrypoint=(sys.executable, "-c")),
    }
    gafaelfawr = GafaelfawrEmulator(
        users=demo_users(), tokens=demo_tokens(), group_mapping=demo_group_mapping()
    ).start()
    settings = ClusterSettings(
        programs=programs, gafaelfawr_url=gafaelfawr.url, node_files=node_files
    )
    kube = KubernetesEmulator(settings=settings).start()
    proxy = IngressProxy(kube.store).start()
    client = kube.api_client()
    try:
        kube.cluster.add_node("node-1")
        kubernetes.client.ApiextensionsV1Api(client).create_custom_resource_definition(crd(PLURAL))
        wait_for(lambda: kube.served.by_plural(PLURAL))
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        servers = FileServers(
            kube,
            proxy,
            core,
            kubernetes.client.BatchV1Api(client),
            kubernetes.client.CustomObjectsApi(client),
            node_files,
        )
        for user in ("rachel", "wile"):
            servers.home(user).mkdir(parents=True)
        (node_files / "srv" / "shared").mkdir(parents=True)
        (node_files / "srv" / "shared" / "readme.txt").write_text("shared\n")
        servers.start("rachel")
        wait_for(lambda: servers.dav("PROPFIND", "/files/rachel/home/").status_code == 207, 30)
        yield servers
    finally:
        client.close()
        proxy.stop()
        kube.stop()
        gafaelfawr.stop()


def test_the_image_runs_the_repositorys_server_on_its_pod_address_with_the_shared_home(
    files: FileServers,
) -> None:
    pod = files.pod_of("rachel")
    log = files.core.read_namespaced_pod_log(pod.metadata.name, NAMESPACE)
    # FILESERVER_HOST is the pod's own address; the mounts' paths (a JSON list) are rewritten.
    assert f"for rachel on {pod.status.pod_ip}:{PORT}" in log
    assert f"home (read-write: {files.home('rachel').parent})" in log
    assert f"shared (read-only: {files.node_files / 'srv' / 'shared'})" in log
    # Its args cannot replace the server: the wrapper is the image's entrypoint.
    program = files.kube.cluster.settings.programs["*/lsstsqre/fileserver"]
    argv = program.argv({"args": ["something", "else"]})
    assert argv[:2] == [sys.executable, str(Path(DEFAULT_PROGRAMS).parent / "fileserver.py")]


def test_only_the_user_with_the_scope_gets_in_with_the_token_as_a_basic_password(
    files: FileServers,
) -> None:
    anonymous = files.dav("PROPFIND", "/files/rachel/home/", caller=None)
    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"].startswith("Basic realm=")
    # wile holds write:files, but this server is rachel's alone.
    assert files.dav("PROPFIND", "/files/rachel/home/", caller="wile").status_code == 403
    # rachel-readonly is rachel's, without write:files.
    assert "write:files" not in demo_tokens()["rachel-readonly"].scopes
    refused = files.dav("PROPFIND", "/files/rachel/home/", caller="rachel-readonly")
    assert refused.status_code == 403
    admitted = files.dav("PROPFIND", "/files/rachel/home/", headers={"Depth": "0"})
    assert admitted.status_code == 207
    # A bearer token is as good (the API's clients), and a wrong password is no token.
    bearer = {"Authorization": f"Bearer {demo_tokens()['rachel'].token}", "Depth": "0"}
    assert files.dav("PROPFIND", "/files/rachel/", caller=None, headers=bearer).status_code == 207
    wrong = requests.request(
        "PROPFIND", files.url("/files/rachel/"), auth=("rachel", "guess"), timeout=10
    )
    assert wrong.status_code == 401


def test_webdav_methods_and_destinations_pass_through_the_proxy(files: FileServers) -> None:
    home = files.home("rachel")
    options = files.dav("OPTIONS", "/files/rachel/home/")
    assert options.status_code == 200
    assert "1" in options.headers["DAV"].split(",")
    assert "PROPFIND" in options.headers["Allow"]
    assert files.dav("MKCOL", "/files/rachel/home/rachel/notes/").status_code == 201
    put = files.dav("PUT", "/files/rachel/home/rachel/notes/a.txt", data=b"first")
    assert put.status_code == 201
    assert (home / "notes" / "a.txt").read_bytes() == b"first"
    listing = files.dav("PROPFIND", "/files/rachel/home/rachel/notes/", headers={"Depth": "1"})
    assert listing.status_code == 207
    assert "/files/rachel/home/rachel/notes/a.txt" in listing.text
    # COPY and MOVE name their target by its full URL, the proxy's: it reaches the server
    # unchanged, with the client's Host, which the server compares it with.
    copy = files.dav(
        "COPY",
        "/files/rachel/home/rachel/notes/a.txt",
        headers={"Destination": files.url("/files/rachel/home/rachel/notes/b.txt")},
    )
    assert copy.status_code == 201
    move = files.dav(
        "MOVE",
        "/files/rachel/home/rachel/notes/b.txt",
        headers={"Destination": files.url("/files/rachel/home/rachel/c.txt"), "Overwrite": "F"},
    )
    assert move.status_code == 201
    assert not (home / "notes" / "b.txt").exists()
    assert (home / "c.txt").read_bytes() == b"first"
    assert files.dav("GET", "/files/rachel/home/rachel/c.txt").content == b"first"
    assert files.dav("DELETE", "/files/rachel/home/rachel/notes/").status_code == 204
    assert not (home / "notes").exists()
    # The read-only mount refuses a write, through the proxy too.
    assert files.dav("GET", "/files/rachel/shared/readme.txt").text == "shared\n"
    assert files.dav("PUT", "/files/rachel/shared/new.txt", data=b"x").status_code == 403


class _Pattern:
    """``size`` bytes of a repeating pattern, read a block at a time: a large file a client
    uploads without holding it (``len`` gives the Content-Length, as davfs2 sends one)."""

    BLOCK = bytes(range(256)) * 256

    def __init__(self, size: int) -> None:
        self.size = size
        self.sent = 0
        self.digest = hashlib.sha256()

    def __len__(self) -> int:
        return self.size - self.sent

    def read(self, amount: int = -1) -> bytes:
        left = self.size - self.sent
        amount = left if amount is None or amount < 0 else min(amount, left)
        data = (self.BLOCK * (amount // len(self.BLOCK) + 1))[:amount]
        self.sent += len(data)
        self.digest.update(data)
        return data


def test_a_100_mb_file_streams_up_and_down_without_being_held_whole(files: FileServers) -> None:
    """The proxy runs in this process: what Python allocates here while 100 MB go up and come
    back down stays a small fraction of it."""
    size = 100 * MEBIBYTE
    upload = _Pattern(size)
    tracemalloc.start()
    try:
        put = files.dav("PUT", "/files/rachel/home/rachel/big.bin", data=upload, timeout=120)
        assert put.status_code == 201, put.text
        digest, received = hashlib.sha256(), 0
        with files.dav("GET", "/files/rachel/home/rachel/big.bin", stream=True, timeout=120) as got:
            assert got.status_code == 200
            assert int(got.headers["Content-Length"]) == size
            for chunk in got.iter_content(256 * 1024):
                digest.update(chunk)
                received += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    stored = files.home("rachel") / "big.bin"
    assert stored.stat().st_size == size == received
    assert digest.hexdigest() == upload.digest.hexdigest()
    assert peak < 16 * MEBIBYTE, f"{peak / MEBIBYTE:.1f} MiB held for a {size // MEBIBYTE} MiB file"
    stored.unlink()


def test_a_lab_pod_mounting_the_home_volume_reads_what_the_file_server_wrote(
    files: FileServers,
) -> None:
    """The lab's home volume is the same host path: its HOME is the user's directory there."""
    put = files.dav("PUT", "/files/rachel/home/rachel/from-dav.txt", data=b"written over WebDAV")
    assert put.status_code == 201
    code = "import os; print(os.environ['HOME']); print(open('from-dav.txt').read())"
    pod = {
        "metadata": {"name": "lab"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "notebook",
                    "image": PROBE_IMAGE,
                    "args": [code],
                    "env": [{"name": "HOME", "value": "/home/rachel"}],
                    "workingDir": "/home/rachel",
                    "volumeMounts": [{"name": "home", "mountPath": "/home"}],
                }
            ],
            "volumes": [{"name": "home", "hostPath": {"path": "/srv/home"}}],
        },
    }
    files.core.create_namespaced_pod(NAMESPACE, pod)

    def phase() -> str:
        return str(files.core.read_namespaced_pod("lab", NAMESPACE).status.phase)

    assert wait_for(lambda: phase() in ("Succeeded", "Failed"), timeout=30)
    log = files.core.read_namespaced_pod_log("lab", NAMESPACE)
    assert (phase(), log.splitlines()) == (
        "Succeeded",
        [str(files.home("rachel")), "written over WebDAV"],
    )
    files.core.delete_namespaced_pod("lab", NAMESPACE)


def test_an_idle_file_server_exits_and_its_job_completes(files: FileServers) -> None:
    files.start("wile", idle_timeout=1)

    def succeeded() -> bool:
        status = files.batch.read_namespaced_job("wile-fs", NAMESPACE).status
        return bool(status.succeeded)

    wait_for(succeeded, timeout=30)
    pod = files.pod_of("wile")
    assert pod.status.phase == "Succeeded"
    log = files.core.read_namespaced_pod_log(pod.metadata.name, NAMESPACE)
    assert "no request for 1s: stopping" in log


def test_the_stack_keeps_the_nodes_files_makes_the_demo_homes_and_serves_file_servers(
    tmp_path: Path,
) -> None:
    """``make run``'s stack: the nodes' files in its state directory with each demo user's
    home, file servers behind its ingress from its registry's image in their namespace, and a
    test's shorter idle timeout through ``config_overrides``."""
    fileserver = {
        "enabled": True,
        "image": "127.0.0.1:8192/lsstsqre/fileserver:1.0",
        "idleTimeout": 5,
    }
    options = StackOptions(
        state_dir=tmp_path, real_labs=True, config_overrides={"fileserver": fileserver}
    )
    stack = LocalStack(options).start(spawner=False)
    try:
        node_files = tmp_path / "node-files"
        assert stack.kube.cluster.settings.node_files == node_files
        assert stack.kube.cluster.processes.host_path("/srv/home") == node_files / "srv" / "home"
        homes = sorted(p.name for p in (node_files / "srv" / "home").iterdir())
        assert homes == ["admin-user", "rachel", "wile"]
        state = json.loads((tmp_path / "stack.json").read_text())
        assert state["node_files"] == str(node_files)
        holders = {name for name, t in state["tokens"].items() if FILES_SCOPE in t["scopes"]}
        assert holders == {"rachel", "wile", "admin-user"}
        config = stack.service_config()["fileserver"]
        assert config["baseUrl"] == stack.ingress.url
        assert config["image"] == f"{stack.registry.host}/lsstsqre/fileserver:1.0"
        assert config["idleTimeout"] == 5
        assert stack.registry.digest_for_reference(config["image"]) is not None
        program = program_for(stack.kube.cluster.settings.programs, config["image"])
        assert program is not None and program.entrypoint[-1].endswith("/fileserver.py")
        # Their namespace, which the chart makes on a cluster.
        assert stack.kube.store.get("namespaces", None, "fileservers") is not None
    finally:
        stack.stop()


@pytest.mark.parametrize(
    ("volumes", "mounts", "expected"),
    [
        # The demo's: the home volume at /home.
        (
            [{"name": "home", "type": "hostPath", "path": "/srv/home"}],
            [{"volumeName": "home", "mountPath": "/home"}],
            "/srv/home/rachel",
        ),
        # The longest mount holding HOME decides, with its subPath.
        (
            [
                {"name": "root", "type": "hostPath", "path": "/srv"},
                {"name": "homes", "type": "hostPath", "path": "/data"},
            ],
            [
                {"volumeName": "root", "mountPath": "/"},
                {"volumeName": "homes", "mountPath": "/home/", "subPath": "users"},
            ],
            "/data/users/rachel",
        ),
        # Homes on NFS are not the nodes' files; no mount holds HOME.
        (
            [{"name": "home", "type": "nfs", "server": "nfs.example", "path": "/home"}],
            [{"volumeName": "home", "mountPath": "/home"}],
            None,
        ),
        ([{"name": "home", "type": "hostPath", "path": "/srv/home"}], [], None),
    ],
)
def test_a_home_directory_is_made_where_a_host_path_volume_holds_it(
    tmp_path: Path, volumes: list[Any], mounts: list[Any], expected: str | None
) -> None:
    lab = {"volumes": volumes, "volumeMounts": mounts}
    assert home_host_path(lab, "rachel") == expected
    made = provision_homes(lab, ["rachel"], lambda path: tmp_path / path.lstrip("/"))
    assert made == ([tmp_path / expected.lstrip("/")] if expected else [])
    assert all(directory.is_dir() for directory in made)

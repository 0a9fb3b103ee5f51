"""File servers on the shared emulated cluster: a configuration that enables them over the
lab's home volume, users with UIDs and the file servers' scope, and the calls tests make."""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from devstack.gafaelfawr import GafaelfawrEmulator, GroupSpec, UserSpec
from devstack.kube import KubernetesEmulator
from tests.clusters.conftest import operators
from tests.labs.conftest import LabUser, admin_headers, lab_raw_config, wait_for
from tests.labs.test_recovery import NEVER, leading

__all__ = ["admin_headers", "lab_raw_config", "operators", "wait_for"]

NAMESPACE = "fileservers"
IMAGE = "registry.test/lsstsqre/fileserver:1.0"
_users = itertools.count(1)


def fileserver_section(**overrides: Any) -> dict[str, Any]:
    return {
        "enabled": True,
        "namespace": NAMESPACE,
        "image": IMAGE,
        "baseUrl": "https://data.test",
        "creationTimeout": 20,
        "deleteTimeout": 20,
        "volumeMounts": [
            {"volumeName": "home", "mountPath": "/home"},
            {"volumeName": "datasets", "mountPath": "/datasets"},
        ],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": 1}},
        "tolerations": [{"key": "files", "operator": "Exists", "effect": "NoSchedule"}],
        **overrides,
    }


def with_fileservers(lab_raw_config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a lab configuration with file servers on, over two lab volumes: ``home``
    (NFS, read-write) and ``datasets`` (a host path, read-only)."""
    raw = copy.deepcopy(lab_raw_config)
    raw["lab"]["volumes"] = [
        {"name": "home", "type": "nfs", "server": "nfs.test", "path": "/export/home"},
        {"name": "datasets", "type": "hostPath", "path": "/srv/datasets", "readOnly": True},
    ]
    raw["lab"]["volumeMounts"] = [
        {"volumeName": "home", "mountPath": "/home"},
        {"volumeName": "datasets", "mountPath": "/datasets"},
    ]
    raw["fileserver"] = fileserver_section()
    return raw


@pytest.fixture
def fileserver_raw_config(operators: None, lab_raw_config: dict[str, Any]) -> dict[str, Any]:
    raw = with_fileservers(lab_raw_config)
    raw["watcher"] = {"leaseSeconds": 1, "watchSeconds": 2, "reconcileSeconds": NEVER}
    return raw


@pytest.fixture
def files_app(fileserver_raw_config: dict[str, Any], make_app: Callable[[Config], Flask]) -> Flask:
    """The service with file servers on, leading the watcher (which ends finished ones)."""
    app = make_app(parse_config(fileserver_raw_config))
    leading(app)
    return app


@pytest.fixture
def client(
    files_app: Flask, kube: KubernetesEmulator, admin_headers: dict[str, str]
) -> Iterator[FlaskClient]:
    """The service's test client; every file server is stopped after the test."""
    client = files_app.test_client()
    yield client
    for username in client.get("/fileserver/v1/users", headers=admin_headers).get_json():
        client.delete(f"/fileserver/v1/users/{username}", headers=admin_headers)
    wait_for(lambda: not kube.store.list("jobs", NAMESPACE))


@pytest.fixture
def files_user(gafaelfawr: GafaelfawrEmulator) -> Callable[..., LabUser]:
    """A new user with a UID, groups, and a token with ``scopes`` (the file servers' by
    default)."""

    def make(scopes: tuple[str, ...] = ("write:files", "exec:notebook")) -> LabUser:
        n = next(_users)
        username = f"fs-u{n}-{int(time.time() * 1000) % 100000}"
        uid = 61000 + n
        gafaelfawr.add_user(
            UserSpec(
                username=username,
                uid=uid,
                gid=uid,
                groups=(GroupSpec(username, uid), GroupSpec("astro", 3100)),
            )
        )
        return LabUser(username, gafaelfawr.issue_token(username, list(scopes)), uid, uid)

    return make


def job_of(kube: KubernetesEmulator, username: str) -> dict[str, Any] | None:
    return kube.store.get("jobs", NAMESPACE, f"{username}-fs")


def objects_of(kube: KubernetesEmulator, username: str) -> dict[str, bool]:
    """Which of the user's file-server objects exist."""
    name = f"{username}-fs"
    return {
        resource: kube.store.get(resource, NAMESPACE, name) is not None
        for resource in ("jobs", "services", "networkpolicies", "gafaelfawringresses")
    }


def gone(kube: KubernetesEmulator, username: str) -> bool:
    return not any(objects_of(kube, username).values()) and not [
        p
        for p in kube.store.list("pods", NAMESPACE)
        if p["metadata"]["labels"].get("lab-spawner.jupyter.org/user") == username
    ]


def start(client: FlaskClient, user: LabUser) -> Any:
    """``GET /files`` asking for JSON."""
    return client.get("/files", headers={**user.headers, "Accept": "application/json"})

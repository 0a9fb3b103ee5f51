"""The client package installs and imports on its own, without the service's dependencies."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

from labspawner.models import Cluster, LabStatus

from app.schemas.labs import LabStatusSchema
from app.workloads.cluster.schemas import ClusterSchema
from devstack.stack import REPO_ROOT

CLIENT = REPO_ROOT / "client"
SERVER_PACKAGES = {"flask", "werkzeug", "gunicorn", "gevent", "kubernetes", "redis", "marshmallow"}


def _pip_environment() -> dict[str, str]:
    """This process's environment without the run's CA bundle (``tests/conftest.py``): that
    bundle is for the run's own HTTPS servers, and a pip given it trusts only those and
    certifi's authorities, not what the machine trusts (a proxy's authority, say), so every
    index it reaches through such a proxy fails after retries."""
    return {k: v for k, v in os.environ.items() if k != "REQUESTS_CA_BUNDLE"}


def test_declared_dependencies_are_the_clients_only() -> None:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    names = {dep.split(">")[0].split("=")[0].strip().lower() for dep in project["dependencies"]}
    assert names == {"requests", "tqdm"}
    assert not names & SERVER_PACKAGES
    assert project["entry-points"]["jupyterhub.spawners"] == {
        "lab-spawner": "labspawner.hub:LabSpawner"
    }


def test_the_entry_point_loads_the_spawner() -> None:
    from labspawner.hub import LabSpawner

    (entry,) = [e for e in entry_points(group="jupyterhub.spawners") if e.name == "lab-spawner"]
    assert entry.load() is LabSpawner


def test_a_built_wheel_installs_into_a_bare_environment_and_works(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(wheels),
            str(CLIENT),
        ],
        check=True,
        capture_output=True,
        env=_pip_environment(),
    )
    (wheel,) = wheels.glob("lab_spawner_client-*.whl")
    members = zipfile.ZipFile(wheel).namelist()
    assert all(m.startswith(("labspawner/", "lab_spawner_client-")) for m in members)
    assert "labspawner/hub/spawner.py" in members

    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True,
        capture_output=True,
        env=_pip_environment(),
    )
    installed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.lower()
    present = {line.split("==")[0] for line in installed.splitlines()}
    assert {"requests", "tqdm", "lab-spawner-client"} <= present
    assert not present & SERVER_PACKAGES
    # Import and use it from outside the repository, isolated from this checkout.
    check = (
        "from labspawner import LabSpawnerClient, NotFoundError; "
        "c = LabSpawnerClient('http://127.0.0.1:1', 'token'); print(c.base_url)"
    )
    out = subprocess.run(
        [str(python), "-I", "-c", check], check=True, capture_output=True, text=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "http://127.0.0.1:1"


def test_the_clients_lab_status_has_the_services_fields() -> None:
    """The client installs without the service, so it keeps its own model of a lab's status;
    the service's schema is the one the routes answer with, and the two name the same fields
    in the same order."""

    served = list(LabStatusSchema().fields)
    assert [f.name for f in dataclasses.fields(LabStatus)] == served


def test_the_clients_cluster_has_the_services_fields() -> None:
    served = list(ClusterSchema().fields)
    assert [f.name for f in dataclasses.fields(Cluster)] == served

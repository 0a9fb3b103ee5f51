"""The file server's configuration, read from the environment, and the Dockerfile stage that
builds its image. (No Docker daemon runs where the tests run, so the image itself is not built
here: the stage's files are laid out as it copies them and its command is run on them.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from devstack.stack import REPO_ROOT
from fileserver.config import ConfigError, Mount, settings_from

DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()


def _environ(directory: Path, **changes: Any) -> dict[str, str]:
    environ = {
        "FILESERVER_USER": "rachel",
        "FILESERVER_MOUNTS": json.dumps([{"name": "home", "path": str(directory)}]),
    }
    environ.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in changes.items()})
    return environ


def test_the_defaults(tmp_path: Path) -> None:
    settings = settings_from(_environ(tmp_path))
    assert (settings.user, settings.prefix, settings.host, settings.port) == (
        "rachel",
        "/files/rachel",
        "0.0.0.0",
        8000,
    )
    assert settings.idle_timeout == 3600
    assert settings.mounts == (Mount(name="home", path=tmp_path, read_only=False),)


def test_every_setting_is_read(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    settings = settings_from(
        _environ(
            tmp_path,
            FILESERVER_URL_PREFIX="/webdav/rachel/",
            FILESERVER_HOST="127.0.0.1",
            FILESERVER_PORT="8123",
            FILESERVER_IDLE_TIMEOUT="1.5",
            FILESERVER_MOUNTS=[
                {"name": "home", "path": str(tmp_path), "readOnly": False},
                {"name": "project", "path": str(tmp_path / "project"), "readOnly": True},
            ],
        )
    )
    assert (settings.prefix, settings.host, settings.port, settings.idle_timeout) == (
        "/webdav/rachel",
        "127.0.0.1",
        8123,
        1.5,
    )
    assert [(m.name, m.read_only) for m in settings.mounts] == [
        ("home", False),
        ("project", True),
    ]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"FILESERVER_USER": ""}, "FILESERVER_USER is not set"),
        ({"FILESERVER_USER": "rachel/../x"}, "FILESERVER_USER: 'rachel/../x' is not a username"),
        ({"FILESERVER_MOUNTS": "{"}, "FILESERVER_MOUNTS: not JSON"),
        ({"FILESERVER_MOUNTS": []}, "FILESERVER_MOUNTS: not a non-empty JSON list"),
        ({"FILESERVER_MOUNTS": ["home"]}, "FILESERVER_MOUNTS[0]: not a JSON object"),
        (
            {"FILESERVER_MOUNTS": [{"name": "home", "path": "{dir}", "readonly": True}]},
            "FILESERVER_MOUNTS[0]: unknown keys ['readonly']",
        ),
        (
            {"FILESERVER_MOUNTS": [{"name": "..", "path": "{dir}"}]},
            "FILESERVER_MOUNTS[0].name: '..' is not a name",
        ),
        (
            {"FILESERVER_MOUNTS": [{"name": "Home", "path": "{dir}"}]},
            "FILESERVER_MOUNTS[0].name: 'Home' is not a name",
        ),
        (
            {"FILESERVER_MOUNTS": [{"name": "home", "path": "home"}]},
            "FILESERVER_MOUNTS[0].path: 'home' is not an absolute path",
        ),
        (
            {"FILESERVER_MOUNTS": [{"name": "home", "path": "{dir}/missing"}]},
            "FILESERVER_MOUNTS[0].path: {dir}/missing is not a directory",
        ),
        (
            {"FILESERVER_MOUNTS": [{"name": "home", "path": "{dir}", "readOnly": "yes"}]},
            "FILESERVER_MOUNTS[0].readOnly: 'yes' is not true or false",
        ),
        (
            {
                "FILESERVER_MOUNTS": [
                    {"name": "home", "path": "{dir}"},
                    {"name": "home", "path": "{dir}"},
                ]
            },
            "FILESERVER_MOUNTS: the name 'home' is used twice",
        ),
        ({"FILESERVER_URL_PREFIX": "files/rachel"}, "FILESERVER_URL_PREFIX: 'files/rachel'"),
        ({"FILESERVER_URL_PREFIX": "/files/../etc"}, "has a '.' or '..' segment"),
        ({"FILESERVER_URL_PREFIX": "/Files/rachel"}, "not an absolute path of lowercase"),
        ({"FILESERVER_PORT": "http"}, "FILESERVER_PORT: 'http' is not a number"),
        ({"FILESERVER_PORT": "70000"}, "FILESERVER_PORT: 70000 is not a TCP port"),
        ({"FILESERVER_IDLE_TIMEOUT": "soon"}, "FILESERVER_IDLE_TIMEOUT: 'soon' is not a number"),
        ({"FILESERVER_IDLE_TIMEOUT": "0"}, "FILESERVER_IDLE_TIMEOUT: '0' is not a positive"),
        ({"FILESERVER_IDLE_TIMEOUT": "inf"}, "FILESERVER_IDLE_TIMEOUT: 'inf' is not a positive"),
    ],
)
def test_a_configuration_that_cannot_serve_is_refused_naming_the_variable(
    tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    placed = {
        name: json.loads(json.dumps(value).replace("{dir}", str(tmp_path)))
        for name, value in changes.items()
    }
    with pytest.raises(ConfigError) as refused:
        settings_from(_environ(tmp_path, **placed))
    assert message.replace("{dir}", str(tmp_path)) in str(refused.value)


def _stage(name: str) -> str:
    """The lines of the Dockerfile's stage ``name``, up to the next stage."""
    match = re.search(rf"^FROM \S+ AS {name}\n(.*?)(?=^FROM |\Z)", DOCKERFILE, re.M | re.S)
    assert match is not None, f"the Dockerfile has no stage {name}"
    return match.group(1)


@pytest.mark.slow
def test_the_image_stage_copies_what_the_program_needs(tmp_path: Path) -> None:
    stage = _stage("fileserver")
    for line in stage.splitlines():
        if line.startswith("COPY "):
            source, destination = line.split()[1:]
            target = tmp_path / destination
            if (REPO_ROOT / source).is_dir():
                shutil.copytree(
                    REPO_ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__")
                )
            else:
                shutil.copy(REPO_ROOT / source, target)
    # Its entrypoint, so that a pod's args cannot replace the server.
    command = re.search(r"^ENTRYPOINT (.+)$", stage, re.M)
    assert command is not None and json.loads(command.group(1)) == ["python", "-m", "fileserver"]
    # The stage installs the pinned requirements, which the tests run with too.
    assert "RUN pip install --no-cache-dir -r requirements.txt" in stage
    pins = re.findall(r"^([\w.-]+)==(\S+)$", (tmp_path / "requirements.txt").read_text(), re.M)
    assert {name for name, _ in pins} == {"wsgidav", "cheroot"}
    assert all(version(name) == pinned for name, pinned in pins)

    environ = {k: v for k, v in os.environ.items() if not k.startswith(("FILESERVER_", "PYTHON"))}
    result = subprocess.run(
        [sys.executable, "-m", "fileserver"],
        cwd=tmp_path,
        env={**environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Every module loaded from the copied files; the empty environment is refused, by name.
    assert result.returncode == 2, result.stderr
    assert "cannot start: FILESERVER_USER is not set" in result.stderr

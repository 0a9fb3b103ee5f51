"""The Dockerfile the chart's image is built from (its last stage, the one built by default):
its files, with its packages (the service's virtualenv, ``devstack.virtualenvs``), are enough
to serve the app, and it agrees with the chart on the command and the user.
(No Docker daemon runs where the tests run, so the image itself is not built here.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from devstack.helm import render_chart
from devstack.stack import REPO_ROOT
from devstack.virtualenvs import service_python

DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()
SERVICE_STAGE = DOCKERFILE[DOCKERFILE.rindex("\nFROM ") :]
LOAD_APP = (
    "import os, sys, gunicorn.config, wsgi; "
    "print(wsgi.app.import_name); sys.stdout.flush(); os._exit(0)"
)


def _copied() -> list[str]:
    sources = []
    for line in SERVICE_STAGE.splitlines():
        if line.startswith("COPY "):
            sources.extend(line.split()[1:-1])
    return sources


def _copy_service_files(root: Path) -> None:
    for source in _copied():
        path = REPO_ROOT / source
        if path.is_dir():
            shutil.copytree(path, root / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, root / source)


def _load_app(root: Path, code: str = LOAD_APP) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "SPAWNER_"))}
    return subprocess.run(
        # Exit at once after loading: the app's background workers (started at load, as under
        # gunicorn) must not race the interpreter's shutdown.
        [service_python(), "-c", code],
        cwd=root,
        env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_copied_files_are_enough_to_load_the_app(tmp_path: Path) -> None:
    _copy_service_files(tmp_path)
    result = _load_app(tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("app.factory")


def test_every_module_the_app_loads_is_compiled_in_the_image(tmp_path: Path) -> None:
    """The image's root filesystem is read-only and it sets ``PYTHONDONTWRITEBYTECODE``: a
    module the build did not compile is compiled from source by every worker at each start."""
    compile_step = re.search(r"^RUN python -m compileall (.+)$", SERVICE_STAGE, re.MULTILINE)
    assert compile_step is not None, "the image compiles no bytecode"
    _copy_service_files(tmp_path)
    subprocess.run(
        [sys.executable, "-m", "compileall", *compile_step.group(1).split()],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=120,
    )
    list_uncompiled = (
        # The runner's module first, as its process imports it: it patches the library.
        "import importlib.util, os, sys, runner, gunicorn.config, wsgi; "
        "root = os.getcwd() + os.sep; "
        "files = [getattr(m, '__file__', None) or '' for m in list(sys.modules.values())]; "
        "ours = [f for f in files if f.startswith(root) and f.endswith('.py')]; "
        "print(len(ours), *[f[len(root):] for f in ours "
        "if not os.path.exists(importlib.util.cache_from_source(f))]); "
        "sys.stdout.flush(); os._exit(0)"
    )
    result = _load_app(tmp_path, list_uncompiled)
    assert result.returncode == 0, result.stderr[-2000:]
    loaded, *uncompiled = result.stdout.split()
    assert int(loaded) > 100
    assert uncompiled == []


def test_the_chart_runs_the_images_command_as_its_user() -> None:
    (deployment,) = [
        d
        for d in render_chart(REPO_ROOT / "chart", values={"ingress": {"host": "example.org"}})
        if d["kind"] == "Deployment" and not d["metadata"]["name"].endswith("-redis")
    ]
    spec = deployment["spec"]["template"]["spec"]
    commands = {container["name"]: container["command"] for container in spec["containers"]}
    cmd = re.search(r"^CMD (.+)$", SERVICE_STAGE, re.MULTILINE)
    user = re.search(r"^USER (\d+):(\d+)$", SERVICE_STAGE, re.MULTILINE)
    assert cmd is not None and user is not None
    # The web container runs the image's command; the runner its own file of the image.
    assert commands["web"] == yaml.safe_load(cmd.group(1))
    assert commands["runner"] == ["python", "runner.py"]
    assert "runner.py" in _copied()
    assert spec["securityContext"]["runAsUser"] == int(user.group(1))
    assert spec["securityContext"]["runAsGroup"] == int(user.group(2))
    assert "requirements.txt" in _copied()

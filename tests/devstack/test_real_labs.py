"""``make run``'s labs are real Jupyter servers: the stack's settings, the lab image's start-up
script, and a lab spawned through the API alone (no JupyterHub) answering at its URL.

The whole path through JupyterHub and a browser is ``tests/browser/``.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from devstack.__main__ import parse_options
from devstack.images import DEFAULT_PROGRAMS, IMAGES_DIR, ProgramsError, load_programs
from devstack.images.lab import command
from devstack.kube.cluster.programs import ImageProgram, program_for
from devstack.kube.crds import OPERATOR_CRDS
from devstack.stack import REAL_LAB_URL, LocalStack, StackOptions
from tests.labs.conftest import wait_for
from tests.support.real_labs import spawn_recommended

SCRIPTS = Path("/venv/bin")


def test_make_run_runs_real_labs_unless_told_to_use_the_stand_in(tmp_path: Path) -> None:
    assert parse_options([], {}).real_labs is True
    assert parse_options([], {}).programs == DEFAULT_PROGRAMS
    assert parse_options(["--lab-standin"], {}).real_labs is False
    assert parse_options([], {"DEVSTACK_LAB_STANDIN": "1"}).real_labs is False
    other = tmp_path / "programs.yaml"
    assert parse_options([], {"DEVSTACK_PROGRAMS": str(other)}).programs == other


def test_a_programs_file_maps_repositories_to_what_their_images_run(tmp_path: Path) -> None:
    path = tmp_path / "programs.yaml"
    path.write_text(
        "echo:\n"
        '  repositories: ["*/demo/echo", "registry.test/echo"]\n'
        '  entrypoint: ["{python}", "-m", "http.server"]\n'
        '  cmd: ["8000"]\n'
        "  env: {GREETING: hello}\n"
        "  workingDir: /srv\n"
    )
    programs = load_programs(path)
    echo = ImageProgram(
        entrypoint=(sys.executable, "-m", "http.server"),
        cmd=("8000",),
        env={"GREETING": "hello"},
        working_dir="/srv",
    )
    assert programs == {"*/demo/echo": echo, "registry.test/echo": echo}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- a list\n", "expected a mapping of names to programs"),
        ("x: {repositories: []}\n", "name at least one repository pattern"),
        ("x: {repositories: [a], entrypoint: python}\n", "expected a list of strings"),
        ("x: {repositories: [a], command: [sh]}\n", "unknown keys ['command']"),
        ("x: {repositories: [a], env: [A=1]}\n", "expected a mapping of names to values"),
    ],
)
def test_a_bad_programs_file_says_what_is_wrong(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "programs.yaml"
    path.write_text(text)
    with pytest.raises(ProgramsError, match=re.escape(problem)):
        load_programs(path)


def test_a_stack_of_real_labs_maps_the_lab_images_and_reaches_labs_by_cluster_ip(
    real_lab_stack: LocalStack, tmp_path: Path
) -> None:
    assert real_lab_stack.lab_standin is None and "lab_url" not in real_lab_stack.state()
    config = yaml.safe_load(real_lab_stack.config_path.read_text(encoding="utf-8"))
    assert config["lab"]["internalUrl"] == REAL_LAB_URL
    programs = real_lab_stack.kube.cluster.settings.programs
    assert programs == load_programs(DEFAULT_PROGRAMS)
    lab = ImageProgram(cmd=(sys.executable, str(IMAGES_DIR / "lab.py")))
    for block in config["prepull"]:
        for image in block.get("images", []):
            found = program_for(programs, image["url"])
            if "/broken-lab:" in image["url"]:
                # The lab's program, with a Python that cannot start (the validation demo).
                assert found == ImageProgram(cmd=lab.cmd, env={"PYTHONHOME": "/nonexistent"})
            else:
                assert found == lab
    assert (
        program_for(programs, f"{real_lab_stack.registry.host}/lsstsqre/sciplat-lab:w_2024_42")
        == lab
    )
    # The provisioning init container stays emulated: its command works on the machine's /home.
    (init,) = config["lab"]["initContainers"]
    assert program_for(programs, init["image"]) is None
    emulated = LocalStack(StackOptions(state_dir=tmp_path))
    assert emulated.lab_standin is not None
    assert emulated.kube.cluster.settings.programs == {}


def test_the_lab_image_listens_on_its_pod_address_at_the_port_the_hub_asked_for() -> None:
    env = {
        "POD_IP": "127.1.2.3",
        "JUPYTERHUB_SERVICE_URL": "http://0.0.0.0:8890/user/rachel/",
        "JUPYTERHUB_USER": "rachel",
    }
    argv, out = command(env, SCRIPTS, as_root=False)
    assert argv == [str(SCRIPTS / "jupyterhub-singleuser")]
    assert out["JUPYTERHUB_SERVICE_URL"] == "http://127.1.2.3:8890/user/rachel/"
    assert out["JUPYTERHUB_USER"] == "rachel"
    # A hub that left the port open gets the lab port.
    env["JUPYTERHUB_SERVICE_URL"] = "http://:0/user/rachel/"
    argv, out = command(env, SCRIPTS, as_root=True)
    assert out["JUPYTERHUB_SERVICE_URL"] == "http://127.1.2.3:8888/user/rachel/"
    assert argv[1:] == ["--ServerApp.allow_root=True"]


def test_without_jupyterhub_the_lab_image_runs_plain_jupyterlab_on_its_address() -> None:
    argv, out = command({"POD_IP": "127.1.2.3"}, SCRIPTS, as_root=False)
    assert argv[:4] == [str(SCRIPTS / "jupyter"), "lab", "--ip=127.1.2.3", "--port=8888"]
    assert "--no-browser" in argv
    assert "JUPYTERHUB_SERVICE_URL" not in out


@pytest.mark.slow
def test_a_lab_spawned_through_the_api_is_a_jupyter_server_at_its_internal_url(
    real_lab_stack: LocalStack,
) -> None:
    tokens = {n: e["token"] for n, e in real_lab_stack.state()["tokens"].items()}
    # Wile's home on the nodes' shared files, where his file server would write.
    home = real_lab_stack.node_files / "srv" / "home" / "wile"
    (home / "from-the-file-server.txt").write_text("written beside the lab")
    spawn_recommended(real_lab_stack.spawner_url, tokens["wile"], "wile")
    url = f"{real_lab_stack.spawner_url}/spawner/v1/labs/wile"
    admin = {"Authorization": f"Bearer {tokens['admin']}"}

    def running() -> dict[str, str] | None:
        status: dict[str, str] = requests.get(url, headers=admin, timeout=10).json()
        assert status["status"] in ("starting", "running"), status
        return status if status["status"] == "running" else None

    status = wait_for(running, timeout=60)
    service = real_lab_stack.kube.store.get("services", "nublado-wile", "nb-wile-lab")
    assert service is not None
    assert status["internal_url"] == f"http://{service['spec']['clusterIP']}:8888"

    def jupyter_answers() -> dict[str, str] | None:
        try:
            answer = requests.get(f"{status['internal_url']}/api", timeout=2)
        except requests.RequestException:
            return None
        return answer.json() if answer.status_code == 200 else None

    assert "version" in wait_for(jupyter_answers, timeout=60)
    # Its log is the server's own output, with the token a person opens it with (printed
    # once the server listens, so a moment after it first answered).
    log_url = f"{real_lab_stack.kube.url}/api/v1/namespaces/nublado-wile/pods/nb-wile-lab/log"
    wait_for(lambda: "token=" in requests.get(log_url, timeout=10).text)
    pids = real_lab_stack.kube.cluster.processes.running(str(_lab_pod_uid(real_lab_stack)))
    assert pids
    # Its HOME is his directory there (the home volume's host path), where it starts: the
    # file the file server's side wrote is in JupyterLab's file browser.
    environ = Path(f"/proc/{pids[0]}/environ").read_bytes().split(b"\0")
    assert f"HOME={home}".encode() in environ
    match = re.search(r"token=([0-9a-f]+)", requests.get(log_url, timeout=10).text)
    assert match is not None
    contents = requests.get(
        f"{status['internal_url']}/api/contents/from-the-file-server.txt",
        headers={"Authorization": f"token {match.group(1)}"},
        timeout=10,
    )
    assert contents.status_code == 200
    assert contents.json()["content"] == "written beside the lab"
    assert requests.delete(url, headers=admin, timeout=10).status_code == 202
    wait_for(lambda: real_lab_stack.kube.store.get("namespaces", None, "nublado-wile") is None)
    assert jupyter_answers() is None
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _lab_pod_uid(stack: LocalStack) -> str:
    pod = stack.kube.store.get("pods", "nublado-wile", "nb-wile-lab")
    assert pod is not None
    return str(pod["metadata"]["uid"])


def test_the_stack_serves_the_operators_and_runs_dask_images_as_processes(
    real_lab_stack: LocalStack,
) -> None:
    served = {r.plural for r in real_lab_stack.kube.served.all() if r.custom}
    assert served == set(OPERATOR_CRDS)
    programs = real_lab_stack.kube.cluster.settings.programs
    assert program_for(programs, "ghcr.io/dask/dask:2026.8.0") == ImageProgram()
    assert program_for(programs, "rayproject/ray:2.40.0") is None


@pytest.mark.slow
def test_the_demo_validates_one_build_and_rejects_the_broken_one(
    real_lab_stack: LocalStack,
) -> None:
    """The demo configuration's ``validated`` source: its validation command runs in a pod
    of each build, a real process; the good build is offered, the broken one (its Python
    cannot start) is rejected with the reason and Python's own words in the log's tail."""
    tokens = {n: e["token"] for n, e in real_lab_stack.state()["tokens"].items()}
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    url = f"{real_lab_stack.spawner_url}/spawner/v1/images/records"

    def settled() -> dict[str, dict[str, Any]] | None:
        found = requests.get(url, headers=admin, timeout=10).json()
        mine = {
            ref.rsplit("/", 1)[-1]: record
            for record in found
            if record["source"] == "validated"
            for ref in record["references"]
        }
        done = all(r["state"] in ("validated", "rejected") for r in mine.values())
        return mine if len(mine) == 2 and done else None

    records = wait_for(settled, timeout=120)
    good, broken = records["simple-lab:1.1"], records["broken-lab:1.0"]
    assert good["state"] == "validated" and good["validation"]["passed"] is True
    assert broken["state"] == "rejected" and broken["validation"]["passed"] is False
    assert "exited with 1" in broken["validation"]["reason"]
    assert "No module named 'encodings'" in "\n".join(broken["validation"]["log_tail"])

"""The example notebooks (notebooks/), executed by nbclient on an ipykernel against the stack.

The kernel inherits this process's environment, so each test sets the variables a lab (or an
administrator) would have with ``monkeypatch`` before executing a notebook.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from labspawner import LabSpawnerClient, LabStatus, NotFoundError

from devstack.stack import LocalStack
from tests.clients.conftest import delete_lab
from tests.support.notebooks import NOTEBOOKS, all_printed, execute, printed

IN_LAB = NOTEBOOKS / "lab-status-and-events.ipynb"
FILE_SERVER = NOTEBOOKS / "file-server.ipynb"
ADMIN = NOTEBOOKS / "admin-labs-and-prepulls.ipynb"
USER = "rachel"
ENV_NAMES = (
    "LAB_SPAWNER_URL",
    "LAB_SPAWNER_TOKEN",
    "ACCESS_TOKEN",
    "JUPYTERHUB_USER",
    "LAB_TO_DELETE",
    "DROP_FAILED_OLDER_THAN",
    "ADMIN_POD_ACTION",
    "STOP_FILE_SERVER",
)


@pytest.fixture
def notebook_env(
    python3_kernel: None, stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> pytest.MonkeyPatch:
    """Only the service URL set; each test adds the token and other variables it needs."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LAB_SPAWNER_URL", stack.spawner_url)
    return monkeypatch


@pytest.fixture
def rachel(
    stack: LocalStack, stack_tokens: dict[str, str], admin: LabSpawnerClient
) -> Iterator[LabSpawnerClient]:
    """Rachel's client; she has no lab before the test, nor after it."""
    delete_lab(admin, USER)
    client = LabSpawnerClient(stack.spawner_url, stack_tokens[USER])
    yield client
    client.close()
    delete_lab(admin, USER)


@pytest.fixture
def rachel_lab(rachel: LabSpawnerClient, lab_options: dict[str, str]) -> LabStatus:
    status = rachel.spawn(USER, lab_options, wait=True, progress=False, timeout=60)
    assert status is not None and status.status == "running"
    return status


def test_in_lab_notebook_shows_the_running_lab_and_its_events(
    notebook_env: pytest.MonkeyPatch,
    stack_tokens: dict[str, str],
    rachel: LabSpawnerClient,
    rachel_lab: LabStatus,
    tmp_path: Path,
) -> None:
    # As inside rachel's lab, without JUPYTERHUB_USER: the username comes from the status.
    notebook_env.setenv("ACCESS_TOKEN", stack_tokens[USER])
    executed = execute(IN_LAB, tmp_path)

    status = printed(executed, "user_status()")
    assert re.search(rf"^User:\s+{USER}$", status, re.MULTILINE)
    assert re.search(r"^Status:\s+running$", status, re.MULTILINE)
    assert re.search(rf"^Image:\s+{re.escape(rachel_lab.options['image'])}$", status, re.MULTILINE)
    assert re.search(r"^Size:\s+small$", status, re.MULTILINE)
    assert re.search(r"^Limits:\s+[\d.]+ CPU, [\d.]+ GiB memory$", status, re.MULTILINE)
    assert rachel_lab.internal_url and rachel_lab.internal_url in status

    lines = printed(executed, "client.events(").splitlines()
    assert lines[-1] == "The operation ended with: complete"
    # One line per event of the spawn, in order, the last one "complete".
    replay = list(rachel.events(USER))
    assert [line.split()[0] for line in lines[:-1]] == [e.type for e in replay]
    assert lines[-2] == "complete"
    assert "progress  100%" in lines
    assert stack_tokens[USER] not in all_printed(executed)


def test_in_lab_notebook_without_a_lab_says_so(
    notebook_env: pytest.MonkeyPatch,
    stack_tokens: dict[str, str],
    rachel: LabSpawnerClient,
    tmp_path: Path,
) -> None:
    notebook_env.setenv("ACCESS_TOKEN", stack_tokens[USER])
    notebook_env.setenv("JUPYTERHUB_USER", USER)
    executed = execute(IN_LAB, tmp_path)

    status = printed(executed, "user_status()")
    assert status.startswith(f"No lab for {USER}: ")
    assert "Status:" not in status
    assert printed(executed, "client.events(") == "No lab, so no events to show.\n"


def test_file_server_notebook_starts_it_says_how_to_mount_it_and_stops_it(
    notebook_env: pytest.MonkeyPatch,
    stack: LocalStack,
    stack_tokens: dict[str, str],
    rachel: LabSpawnerClient,
    tmp_path: Path,
) -> None:
    notebook_env.setenv("ACCESS_TOKEN", stack_tokens[USER])
    notebook_env.setenv("STOP_FILE_SERVER", "yes")
    executed = execute(FILE_SERVER, tmp_path)

    url = f"{stack.state()['ingress_url']}/files/{USER}/"
    started = printed(executed, "start_file_server()")
    assert started.splitlines()[0] == f"Your file server: {url}"
    assert f"{url}home/  (/home in your lab, read-write)" in started
    mounting = printed(executed, "davfs")
    assert f"sudo mount -t davfs -o uid=$(id -u),gid=$(id -g) {url} ~/lab-files" in mounting
    assert f"net use Z: {url} /user:{USER} *" in mounting
    stopped = printed(executed, "STOP_FILE_SERVER =")
    assert stopped == "Stopped your file server.\nNo file server runs for you now.\n"
    assert rachel.file_server() is None
    assert stack_tokens[USER] not in all_printed(executed)


def test_admin_notebook_lists_reports_and_deletes(
    notebook_env: pytest.MonkeyPatch,
    stack_tokens: dict[str, str],
    admin: LabSpawnerClient,
    rachel_lab: LabStatus,
    tmp_path: Path,
) -> None:
    notebook_env.setenv("LAB_SPAWNER_TOKEN", stack_tokens["admin"])
    notebook_env.setenv("LAB_TO_DELETE", USER)
    notebook_env.setenv("DROP_FAILED_OLDER_THAN", "86400")
    prepull_configs = [c["name"] for c in admin.prepulls()["configs"]]
    image_configs = [c["name"] for c in admin.images()["configs"]]
    assert prepull_configs and image_configs
    executed = execute(ADMIN, tmp_path)

    labs = printed(executed, "admin.lab_status(")
    image = rachel_lab.options["image"].rsplit("/", 1)[-1]
    row = rf"^{USER}\s+running\s+present\s+small\s+[\d.]+\s+[\d.]+\s+{re.escape(image)}$"
    assert re.search(row, labs, re.MULTILINE), labs

    operations = printed(executed, "admin.operations()")
    assert operations.strip()
    assert not re.search(rf"^spawn\s+lab\s+{USER}\b", operations, re.MULTILINE)
    for line in operations.splitlines():
        if line != "No spawn or delete in progress.":
            assert re.match(r"^(spawn|delete)\s+\w+\s+\S+\s+\d+ s  (worker|waiting)", line), line

    leaders = printed(executed, "admin.leaders()")
    for loop in ("image-refresher", "lab-watcher", "prepuller"):
        assert re.search(rf"^{loop}\s+\S+ \(pid \d+\), worker \d+, ", leaders, re.M), leaders

    audited = printed(executed, "admin.audit(")
    assert audited.startswith("Maintenance mode is off.\n"), audited
    assert re.search(r"^\d+ recent administrator action\(s\)$", audited, re.M), audited

    failed = printed(executed, "admin.failed_labs()")
    assert re.search(r"^\d+ failed lab\(s\)$", failed, re.M), failed
    # Nothing on the stack failed a day ago.
    assert failed.endswith("Deleting 0 of them: deleting 0 failed labs older than 86400 s\n")

    # JupyterHub's admin:notebook token is not one for the maintenance pod (admin:lab-pods).
    pod_text = printed(executed, "admin.admin_pod()")
    assert pod_text.startswith("The maintenance pod is not for this token: "), pod_text
    assert "admin:lab-pods" in pod_text

    images = printed(executed, "admin.images()")
    for name in image_configs:
        assert re.search(rf"^{re.escape(name)} \(", images, re.MULTILINE)
    assert "recommended:" in images

    prepulls = printed(executed, "admin.prepulls()")
    assert prepulls.startswith("Prepuller last looked: ")
    for name in prepull_configs:
        assert re.search(
            rf"^{re.escape(name)} \(\w[\w-]*\): \d+ prepulled, \d+ pending", prepulls, re.M
        )
    assert re.search(r"^NODE\s+ELIGIBLE\s+CACHED$", prepulls, re.MULTILINE)

    deleted = printed(executed, "LAB_TO_DELETE =")
    assert f"Deleted {USER}'s lab." in deleted
    assert USER not in deleted.splitlines()[-1]
    assert stack_tokens["admin"] not in all_printed(executed)

    # Checked from outside: the lab is gone.
    with pytest.raises(NotFoundError):
        admin.lab_status(USER)
    assert USER not in admin.list_labs()


def test_notebooks_are_valid_and_saved_without_outputs() -> None:
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert {IN_LAB, ADMIN} <= set(paths)
    for path in paths:
        notebook = nbformat.read(path, as_version=nbformat.NO_CONVERT)
        nbformat.validate(notebook)
        assert notebook.nbformat == 4
        assert set(notebook.metadata) == {"kernelspec"}, path.name
        assert notebook.metadata.kernelspec.name == "python3"
        assert any(c.cell_type == "markdown" for c in notebook.cells), path.name
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert code, path.name
        for cell in code:
            assert cell.outputs == [], f"{path.name}: {cell.source[:40]!r} has outputs"
            assert cell.execution_count is None, f"{path.name}: {cell.source[:40]!r} was run"

"""Executing the example notebooks (``notebooks/``) with nbclient on an ipykernel of this
interpreter, and reading what they printed."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import NoSuchKernel
from nbclient import NotebookClient

from devstack.stack import REPO_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"


def _python3_kernel_command() -> list[str]:
    try:
        return list(KernelManager(kernel_name="python3").format_kernel_cmd())
    except NoSuchKernel:
        return []


@pytest.fixture(scope="module")
def python3_kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Make the ``python3`` kernel run this interpreter (the venv, which has labspawner)."""
    with pytest.MonkeyPatch.context() as patch:
        command = _python3_kernel_command()
        if not command or command[0] != sys.executable:
            jupyter_path = tmp_path_factory.mktemp("jupyter")
            spec_dir = jupyter_path / "kernels" / "python3"
            spec_dir.mkdir(parents=True)
            spec = {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3",
                "language": "python",
            }
            (spec_dir / "kernel.json").write_text(json.dumps(spec))
            patch.setenv("JUPYTER_PATH", str(jupyter_path))
        assert _python3_kernel_command()[0] == sys.executable
        yield


def execute(path: Path, workdir: Path, env: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """Run every cell (an error in one raises ``CellExecutionError``); the executed notebook.
    With ``env``, the kernel's process has exactly that environment (a lab's, say) rather
    than the test's."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=60,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    if env is None:
        client.execute()
    else:
        client.execute(env=env)
    return notebook


def process_environment(pid: int) -> dict[str, str]:
    """A running process's environment, as it was started."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (entry.split(b"=", 1) for entry in raw.split(b"\0") if b"=" in entry)
    return {name.decode(): value.decode() for name, value in pairs}


def stdout(cell: nbformat.NotebookNode) -> str:
    assert all(o["output_type"] != "error" for o in cell.outputs)
    return "".join(o["text"] for o in cell.outputs if o.get("name") == "stdout")


def printed(notebook: nbformat.NotebookNode, marker: str) -> str:
    """What the one code cell whose source contains ``marker`` printed."""
    (cell,) = [c for c in notebook.cells if c.cell_type == "code" and marker in c.source]
    return stdout(cell)


def all_printed(notebook: nbformat.NotebookNode) -> str:
    return "".join(stdout(c) for c in notebook.cells if c.cell_type == "code")

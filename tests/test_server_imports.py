"""The server process never imports the Kubernetes client's optional validator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import runpy, sys
runpy.run_path("gunicorn.conf.py")
import app.factory
import kubernetes.client
loaded = sorted(m for m in ("kubernetes_validate", "jsonschema") if sys.modules.get(m))
print(",".join(loaded) or "none")
"""


def _loaded_after(code: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return completed.stdout.strip()


def test_the_server_settings_leave_the_validator_unimported() -> None:
    assert _loaded_after(PROBE) == "none"


def test_without_the_server_settings_the_client_imports_it() -> None:
    """The test above can fail: this environment has the validator, and the client takes it."""
    assert "kubernetes_validate" in _loaded_after(
        "import kubernetes, sys; print(sorted(sys.modules))"
    )

"""The images the local stack runs as real processes, and what each runs.

The emulated kubelet runs a container whose image repository matches one of these patterns as
a child process (``devstack.kube.cluster.programs``); every other container stays emulated. The
programs are found beside the stack's own Python, so what ``make setup`` installed is what runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from devstack.kube.cluster.programs import ImageProgram

LAB_ENTRYPOINT = Path(__file__).resolve().parent / "lab.py"

LAB = ImageProgram(entrypoint=(sys.executable, str(LAB_ENTRYPOINT)))
"""A lab image: JupyterHub's single-user server with JupyterLab (``images/lab.py``)."""

LAB_REPOSITORIES = ("*/lsstsqre/sciplat-lab", "*/lsstsqre/simple-lab")
"""The demo configuration's lab images, in any registry."""


def lab_programs() -> dict[str, ImageProgram]:
    """Every lab image of the demo configuration runs a real Jupyter server."""
    return dict.fromkeys(LAB_REPOSITORIES, LAB)

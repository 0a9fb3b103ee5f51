"""The interpreter the service's own processes run with: its image's packages, nothing more.

The local stack, the tests and the benchmarks run gunicorn and the runner from a virtualenv
holding ``requirements.txt`` only (``make setup`` makes it beside the development one), as the
image installs it. The development virtualenv holds what the tests and the local stack need
besides, and some of it changes the service: with ``kubernetes-validate`` installed, importing
the ``kubernetes`` client imports it and, through ``jsonschema``, a URI grammar that is built
at import, measured at about 1.5 s of CPU and 21 MiB more for each process that talks to
Kubernetes. A runner measured there would start slower and weigh more than the image's does
(the server used to mark the validator absent in its own module table to avoid that; with
its own packages it needs no such trick); and a module the service imports from a
development package alone would go unnoticed until the image failed.

Without that virtualenv (a checkout set up by other means) the service runs in this
interpreter, as it did before, and a warning says so.
"""

from __future__ import annotations

import logging
import sys
from functools import cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVICE_VENV = REPO_ROOT / ".venv" / "service"
"""Where ``make setup`` installs ``requirements.txt`` for the service's processes."""

_log = logging.getLogger(__name__)


@cache
def service_python() -> str:
    """The service virtualenv's interpreter, or this one when it is missing."""
    python = SERVICE_VENV / "bin" / "python"
    if python.exists():
        return str(python)
    _log.warning(
        "%s is missing (make setup makes it): the service runs with this interpreter's "
        "packages, the development ones included",
        SERVICE_VENV,
    )
    return sys.executable

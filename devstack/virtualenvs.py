"""The interpreters the service's processes and the real Dask operator run with: each with its
image's packages, nothing more.

The local stack, the tests and the benchmarks run gunicorn and the runner from a virtualenv
holding ``requirements.txt`` only, and the Dask operator from one holding
``requirements-dask-operator.txt`` only (``make setup`` makes both beside the development
one), as their images hold their own packages. The development virtualenv holds what the
tests and the local stack need besides, and some of it changes a program: with
``kubernetes-validate`` installed, importing the ``kubernetes`` client imports it and, through
``jsonschema``, a URI grammar that is built at import, measured at about 1.5 s of CPU and
21 MiB more for each process that imports the client (the operator's controller took 3.1 s
to import there, 1.25 s in its own virtualenv). A runner measured there would start slower
and weigh more than the image's does (the server used to mark the validator absent in its own
module table to avoid that; with its own packages it needs no such trick); and a module the
service imports from a development package alone would go unnoticed until the image failed.

Without such a virtualenv (a checkout set up by other means) the program runs with this
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
DASK_OPERATOR_VENV = REPO_ROOT / ".venv" / "dask-operator"
"""Where ``make setup`` installs ``requirements-dask-operator.txt`` for the Dask operator."""

_log = logging.getLogger(__name__)


def service_python() -> str:
    """The service virtualenv's interpreter, or this one when it is missing."""
    return _python(SERVICE_VENV)


def dask_operator_python() -> str:
    """The Dask operator virtualenv's interpreter, or this one when it is missing."""
    return _python(DASK_OPERATOR_VENV)


@cache
def _python(venv: Path) -> str:
    python = venv / "bin" / "python"
    if python.exists():
        return str(python)
    _log.warning(
        "%s is missing (make setup makes it): its program runs with this interpreter's "
        "packages, the development ones included",
        venv,
    )
    return sys.executable

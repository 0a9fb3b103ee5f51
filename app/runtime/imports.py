"""What the server process leaves unimported: the Kubernetes client's optional validator.

Importing ``kubernetes`` always imports ``kubernetes.dynamic``, whose client imports the
optional ``kubernetes_validate`` package when it is installed (the development and test
environment has it: the tests validate every manifest the builders make against the
official schemas). That import brings ``jsonschema`` and a URI grammar compiled at import
time: 1.1-1.5 s and 20 MiB more in every worker, measured by the ``restart`` benchmark
(``docs/developer/benchmarks.md``, "Restart with 430 labs to a full list"), and the service
never validates with it. Marking the package absent in the server's own module table,
before anything imports ``kubernetes``, makes ``kubernetes.dynamic`` take its documented
path for a missing validator; nothing of the library is changed.

The version guard: that the validator is optional there was checked in the client's
``dynamic`` package of the majors in ``CHECKED_CLIENT_MAJOR_VERSIONS``; under any other the
validator is left importable, which costs start-up time and never correctness.

Only the server calls this (``before_app_import``, from ``gunicorn.conf.py``): tests and
tools that import the app in-process keep the validator.
"""

from __future__ import annotations

import sys
from importlib import metadata

OPTIONAL_VALIDATOR = "kubernetes_validate"

CHECKED_CLIENT_MAJOR_VERSIONS = frozenset({"37"})
"""Versions of the ``kubernetes`` client whose ``dynamic`` package was checked to import
the validator only optionally; for any other the validator is left importable."""


def leave_validator_unimported() -> bool:
    """Mark the validator absent for this process; False if that was not safe to do (an
    unchecked client version, or the client already imported)."""
    try:
        major = metadata.version("kubernetes").split(".", 1)[0]
    except metadata.PackageNotFoundError:
        return False
    if major not in CHECKED_CLIENT_MAJOR_VERSIONS or "kubernetes" in sys.modules:
        return False
    # None in the module table is the import system's documented "not importable".
    sys.modules.setdefault(OPTIONAL_VALIDATOR, None)  # type: ignore[arg-type]
    return True

"""A service process of its own that begins an operation and never ends it, for the tests
that kill it with SIGKILL and see another worker finish the operation.

The test starts the process (``held_service``) with its configuration as JSON on stdin; the
process (a module whose ``main`` calls ``hold``) builds the service with kinds of which one
stops for good in the middle of its step, starts its background work as a server's worker
does, begins the operation and waits to be killed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from flask import Flask

from app import create_app
from app.config import parse_config
from app.extensions.labs import start_background
from app.workloads.kinds import KindFactory
from devstack.stack import REPO_ROOT


def hold(kinds: Sequence[KindFactory], begin: Callable[[Flask], object]) -> None:
    """In the held process: the service of ``kinds``, its operation begun by ``begin``;
    never returns."""
    app = create_app(parse_config(json.load(sys.stdin)), kinds=kinds)
    start_background(app)
    with app.app_context():
        begin(app)
    threading.Event().wait()


@contextmanager
def held_service(
    module: str, args: Sequence[str], config: dict[str, Any]
) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m module *args`` with ``config`` on its stdin, killed when the block ends
    if the test has not killed it already."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        assert process.stdin is not None
        process.stdin.write(json.dumps(config).encode())
        process.stdin.close()
        yield process
    finally:
        process.kill()
        process.wait(timeout=10)

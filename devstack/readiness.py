"""Waiting for a process the stack started to answer on its HTTP endpoint."""

from __future__ import annotations

import contextlib
import subprocess
import time

import requests


def await_url(url: str, timeout: float, process: subprocess.Popen[bytes] | None, name: str) -> None:
    """Wait until ``url`` answers 200; fail at once if ``process`` (which serves it, called
    ``name`` in errors) exits, and after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{name} exited with code {process.returncode} at start-up")
        with contextlib.suppress(requests.RequestException):
            if requests.get(url, timeout=1).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} ({name}) did not answer in time")
        time.sleep(0.1)

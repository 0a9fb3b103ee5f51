"""The file server as its image runs it (``python -m fileserver``), in a child process on a free
loopback port, its log read as it is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from devstack.redis_process import free_port
from devstack.stack import REPO_ROOT

USER = "rachel"
PREFIX = f"/files/{USER}"


class FileServerProcess:
    """A running file server with a read-write mount ``home`` and a read-only one ``shared``."""

    def __init__(self, home: Path, shared: Path, idle_timeout: float = 60.0) -> None:
        self.home = home
        self.shared = shared
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}{PREFIX}"
        mounts = [
            {"name": "home", "path": str(home), "readOnly": False},
            {"name": "shared", "path": str(shared), "readOnly": True},
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("FILESERVER_")}
        env.update(
            {
                "FILESERVER_USER": USER,
                "FILESERVER_HOST": "127.0.0.1",
                "FILESERVER_PORT": str(self.port),
                "FILESERVER_MOUNTS": json.dumps(mounts),
                "FILESERVER_IDLE_TIMEOUT": str(idle_timeout),
            }
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fileserver"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: list[str] = []
        self._ended = False
        self._changed = threading.Condition()
        threading.Thread(target=self._read_log, daemon=True).start()
        # The start line is written once the socket listens: from then on it answers.
        self.wait_for_log("serving ")

    def _read_log(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    @property
    def log(self) -> str:
        with self._changed:
            return "".join(self._lines)

    def wait_for_log(self, text: str, timeout: float = 15.0) -> None:
        """Until a line of the log holds ``text``; fails if the process ends without one."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not any(text in line for line in self._lines):
                remaining = deadline - time.monotonic()
                assert not self._ended, f"the file server ended without {text!r}:\n{self.log}"
                assert remaining > 0, f"no {text!r} in the file server's log:\n{self.log}"
                self._changed.wait(remaining)

    def wait_for_exit(self, timeout: float) -> int:
        """The exit status, once the process has ended and its log has been read."""
        status = self.process.wait(timeout=timeout)
        with self._changed:
            self._changed.wait_for(lambda: self._ended, timeout=5)
        return status

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

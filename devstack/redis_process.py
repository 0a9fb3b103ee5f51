"""Start a throw-away ``redis-server`` for the local stack when no Redis URL is given."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

from devstack.launch import launched


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisProcess:
    """A ``redis-server`` child process without persistence, on a chosen or free port."""

    def __init__(self, workdir: Path, port: int = 0) -> None:
        self.port = port or free_port()
        self._workdir = workdir
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisProcess:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (make setup installs it)")
        self._workdir.mkdir(parents=True, exist_ok=True)
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--dir", str(self._workdir)]
        args += ["--maxclients", "10000"]
        self._process = subprocess.Popen(
            launched(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                client.close()
                return self
            except redis.ConnectionError:
                if self._process.poll() is not None:
                    raise RuntimeError("redis-server exited at start-up") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def pause(self) -> None:
        """Stop the server answering while its connections stay open (SIGSTOP), as a hung
        host or a network partition looks to its clients."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            self._process = None

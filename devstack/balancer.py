"""The load balancer in front of several replicas of the service: HAProxy on loopback.

In a cluster, a Kubernetes Service (or the ingress) spreads requests over the service's pods;
here HAProxy, from Debian's packages, does that for the local stack's replicas. Every request
goes to the next replica in turn (HTTP mode: keep-alive connections are balanced request by
request, so one client's spawn and its event stream may be served by different replicas).
A replica that stops accepting connections is skipped: HAProxy retries a refused connection
on the next one at once, and its health check (``/healthz``, twice a second) takes a dead
replica out of the turn until it answers again. A ``GET`` whose replica closed the connection
without answering (it died under it) is sent to the next one; any other request already sent
to a replica that dies gets 502, as through any balancer, and its client decides whether to
send it again.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from devstack.launch import launched


@dataclass(frozen=True)
class Backend:
    """One replica, as the balancer sends to it."""

    name: str
    port: int


def haproxy_config(port: int, backends: list[Backend]) -> str:
    """HAProxy's configuration: round-robin over ``backends`` on ``127.0.0.1:port``.

    Each connection costs HAProxy two file descriptors, so ``maxconn`` stays well inside a
    usual open-files limit. Event streams stay open for minutes, so the client and server
    timeouts are long; a
    connection attempt to a replica gets 1 s. Every answer names the replica that gave it
    (``X-Spawner-Replica``), for whoever follows a request across replicas.
    """
    servers = "\n".join(
        f"    server {backend.name} 127.0.0.1:{backend.port} check" for backend in backends
    )
    return f"""global
    maxconn 4000

defaults
    mode http
    timeout connect 1s
    timeout client 1h
    timeout server 1h
    timeout http-keep-alive 10s
    timeout queue 10s
    retries 3
    retry-on conn-failure empty-response
    option redispatch 1

frontend spawner
    bind 127.0.0.1:{port}
    http-request disable-l7-retry unless METH_GET || METH_HEAD
    default_backend replicas

backend replicas
    balance roundrobin
    http-response set-header X-Spawner-Replica %s
    option httpchk GET /healthz
    default-server inter 500ms fall 1 rise 1
{servers}
"""


class LoadBalancer:
    """An ``haproxy`` child process balancing ``127.0.0.1:port`` over ``backends``."""

    def __init__(self, workdir: Path, port: int, backends: list[Backend]) -> None:
        self.port = port
        self.backends = backends
        self._workdir = workdir
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> LoadBalancer:
        binary = shutil.which("haproxy") or (
            "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None
        )
        if binary is None:
            raise RuntimeError("haproxy is not installed (make setup installs it)")
        self._workdir.mkdir(parents=True, exist_ok=True)
        config = self._workdir / "haproxy.cfg"
        config.write_text(haproxy_config(self.port, self.backends), encoding="utf-8")
        self._process = subprocess.Popen(
            launched([binary, "-db", "-f", str(config)]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if self._process.poll() is not None:
                    raise RuntimeError("haproxy exited at start-up") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            self._process = None

"""Readiness probes of process-run containers, executed for real as a kubelet's prober does.

A container with a ``readinessProbe`` is ready only once the probe has passed
``successThreshold`` times in a row, and unready again after ``failureThreshold`` failures;
the probe runs every ``periodSeconds`` after ``initialDelaySeconds``, and an attempt that takes
longer than ``timeoutSeconds`` fails. HTTP probes (``httpGet``: a status from 200 to 399 passes)
and TCP probes (``tcpSocket``: the connection opens) are run against the pod's own loopback
address. ``exec`` and ``grpc`` probes are not run by the local stack: such a container is
counted ready once started, and the kubelet says so in a pod event.

Each probed container has a thread of its own, which sleeps between attempts on an event so
that stopping it (the container exited, the pod is deleted) is immediate.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .containers import port_number
from .processes import ContainerConfigError

Verdict = Callable[[bool], None]
"""Called (from the probe's thread) when a container's readiness changes."""


@dataclass(frozen=True)
class Timing:
    """When a probe runs and how many results in a row change the verdict."""

    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3

    @classmethod
    def of(cls, spec: dict[str, Any]) -> Timing:
        """From a probe's fields, with the API's defaults."""
        return cls(
            initial_delay=float(spec.get("initialDelaySeconds") or 0),
            period=float(spec.get("periodSeconds") or 10),
            timeout=float(spec.get("timeoutSeconds") or 1),
            success_threshold=int(spec.get("successThreshold") or 1),
            failure_threshold=int(spec.get("failureThreshold") or 3),
        )


@dataclass(frozen=True)
class Probe:
    """One container's readiness probe, with its port resolved."""

    kind: str
    """``http`` or ``tcp``."""
    host: str
    port: int
    path: str = "/"
    scheme: str = "HTTP"
    headers: dict[str, str] = field(default_factory=dict)
    timing: Timing = field(default_factory=Timing)

    def attempt(self) -> bool:
        """One try: did the probe pass?"""
        if self.kind == "tcp":
            try:
                socket.create_connection(
                    (self.host, self.port), timeout=self.timing.timeout
                ).close()
            except OSError:
                return False
            return True
        connection_class = (
            http.client.HTTPSConnection if self.scheme == "HTTPS" else http.client.HTTPConnection
        )
        connection = connection_class(self.host, self.port, timeout=self.timing.timeout)
        try:
            connection.request("GET", self.path, headers=self.headers)
            status = connection.getresponse().status
        except (OSError, http.client.HTTPException):
            return False
        finally:
            connection.close()
        return 200 <= status < 400


UNSUPPORTED = ("exec", "grpc")
"""Probe handlers the local stack does not run."""


def readiness_probe(container: dict[str, Any], pod_ip: str) -> Probe | None:
    """The container's readiness probe, or None when it has none the stack runs.

    Raises ``ContainerConfigError`` for a probe that names a port the container lacks.
    """
    spec = container.get("readinessProbe")
    if not spec:
        return None
    timing = Timing.of(spec)
    if "httpGet" in spec:
        action = spec["httpGet"]
        headers = {str(h.get("name")): str(h.get("value")) for h in action.get("httpHeaders") or []}
        return Probe(
            kind="http",
            host=str(action.get("host") or pod_ip),
            port=_port(container, action.get("port")),
            path=str(action.get("path") or "/"),
            scheme=str(action.get("scheme") or "HTTP").upper(),
            headers=headers,
            timing=timing,
        )
    if "tcpSocket" in spec:
        action = spec["tcpSocket"]
        return Probe(
            kind="tcp",
            host=str(action.get("host") or pod_ip),
            port=_port(container, action.get("port")),
            timing=timing,
        )
    return None


def _port(container: dict[str, Any], port: Any) -> int:
    """A probe's port: a number, or the name of one of the container's ports."""
    number = port_number(port, [container])
    if number is not None:
        return number
    raise ContainerConfigError(
        f'readiness probe port "{port}" is not a port of container {container.get("name")}'
    )


class Prober:
    """The probe threads of every process-run container, by (pod uid, container name)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stops: dict[tuple[str, str], threading.Event] = {}

    def start(self, uid: str, container: str, probe: Probe, verdict: Verdict) -> None:
        """Probe until stopped, calling ``verdict`` whenever readiness changes."""
        key = (uid, container)
        stop = threading.Event()
        with self._lock:
            previous = self._stops.pop(key, None)
            self._stops[key] = stop
        if previous is not None:
            previous.set()
        thread = threading.Thread(
            target=_probe_loop,
            args=(probe, stop, verdict),
            name=f"probe-{container}",
            daemon=True,
        )
        thread.start()

    def stop(self, uid: str, container: str | None = None) -> None:
        """Stop probing one container of the pod, or all of them."""
        with self._lock:
            keys = [k for k in self._stops if k[0] == uid and container in (None, k[1])]
            stops = [self._stops.pop(k) for k in keys]
        for stop in stops:
            stop.set()

    def stop_all(self) -> None:
        with self._lock:
            stops = list(self._stops.values())
            self._stops.clear()
        for stop in stops:
            stop.set()


def _probe_loop(probe: Probe, stop: threading.Event, verdict: Verdict) -> None:
    ready = False
    streak = 0
    timing = probe.timing
    if stop.wait(timing.initial_delay):
        return
    while not stop.is_set():
        passed = probe.attempt()
        if stop.is_set():
            return
        streak = streak + 1 if passed != ready else 0
        threshold = timing.success_threshold if passed else timing.failure_threshold
        if passed != ready and streak >= threshold:
            ready, streak = passed, 0
            verdict(ready)
        if stop.wait(timing.period):
            return

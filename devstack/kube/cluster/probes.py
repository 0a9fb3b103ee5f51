"""Readiness probes of process-run containers, executed for real as a kubelet's prober does.

A container with a ``readinessProbe`` is ready only once the probe has passed
``successThreshold`` times in a row, and unready again after ``failureThreshold`` failures;
the probe runs every ``periodSeconds`` after ``initialDelaySeconds``, and an attempt that takes
longer than ``timeoutSeconds`` fails. HTTP probes (``httpGet``: a status from 200 to 399 passes)
and TCP probes (``tcpSocket``: the connection opens) are run against the pod's own loopback
address, and pass only when one of the pod's own processes is the one listening there
(``listeners``): on a real node nothing else could answer in the pod's network namespace, and
a probe that another process answers (another stack's lab at the same address, say) must not
make the container ready. Such a probe fails with an event saying so. ``exec`` and ``grpc``
probes are not run by the local stack: such a container is counted ready once started, and
the kubelet says so in a pod event.

Each probed container has a thread of its own, which sleeps between attempts on an event so
that stopping it (the container exited, the pod is deleted) is immediate.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .containers import port_number
from .listeners import holder_among, listening_socket
from .processes import ContainerConfigError

Verdict = Callable[[bool, str | None], None]
"""Called (from the probe's thread) when a container's readiness changes, with why the
probe failed when it is not ready."""


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


class Failure(NamedTuple):
    """Why a probe attempt failed; ``foreign`` when something that is not the pod answered."""

    message: str
    foreign: bool = False


Owners = Callable[[], list[int]]
"""The process ids of the pod's running containers (the processes they start count too)."""


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
    owners: Owners | None = None
    """Whose listening socket may answer; None: any (a probe of a host outside the pod)."""

    def attempt(self) -> Failure | None:
        """One try: None when the probe passed, else why it failed."""
        if self.kind == "tcp":
            try:
                socket.create_connection(
                    (self.host, self.port), timeout=self.timing.timeout
                ).close()
            except OSError as exc:
                return Failure(f"dial tcp {self.host}:{self.port}: {exc.strerror or exc}")
            return self._not_ours()
        connection_class = (
            http.client.HTTPSConnection if self.scheme == "HTTPS" else http.client.HTTPConnection
        )
        connection = connection_class(self.host, self.port, timeout=self.timing.timeout)
        try:
            connection.request("GET", self.path, headers=self.headers)
            status = connection.getresponse().status
        except (OSError, http.client.HTTPException) as exc:
            return Failure(f"Get {self.path} on {self.host}:{self.port}: {exc}")
        finally:
            connection.close()
        if not 200 <= status < 400:
            return Failure(f"HTTP probe failed with statuscode: {status}")
        return self._not_ours()

    def _not_ours(self) -> Failure | None:
        """Why the answer was not the pod's own, if it was not."""
        if self.owners is None:
            return None
        inode = listening_socket(self.host, self.port)
        if inode is not None and holder_among(inode, self.owners()) is not None:
            return None
        return Failure(
            f"{self.host}:{self.port} is answered by a process that is not this pod's "
            "(another process holds the port at the pod's address)",
            foreign=True,
        )


UNSUPPORTED = ("exec", "grpc")
"""Probe handlers the local stack does not run."""


def readiness_probe(
    container: dict[str, Any], pod_ip: str, owners: Owners | None = None
) -> Probe | None:
    """The container's readiness probe, or None when it has none the stack runs; one of the
    pod's own address passes only when a process of ``owners`` listens there.

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
            owners=None if action.get("host") else owners,
        )
    if "tcpSocket" in spec:
        action = spec["tcpSocket"]
        return Probe(
            kind="tcp",
            host=str(action.get("host") or pod_ip),
            port=_port(container, action.get("port")),
            timing=timing,
            owners=None if action.get("host") else owners,
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
    told: str | None = None
    while not stop.is_set():
        failure = probe.attempt()
        passed = failure is None
        if stop.is_set():
            return
        streak = streak + 1 if passed != ready else 0
        threshold = timing.success_threshold if passed else timing.failure_threshold
        if passed != ready and streak >= threshold:
            ready, streak = passed, 0
            verdict(ready, None if failure is None else failure.message)
        elif failure is not None and failure.foreign and failure.message != told:
            # Not ready, and not merely not listening yet: say what answers instead, once.
            verdict(False, failure.message)
        told = failure.message if failure is not None and failure.foreign else None
        if stop.wait(timing.period):
            return

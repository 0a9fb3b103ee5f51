"""Request-level faults: what a sick API server does to its clients.

Tests arm faults to prove the service survives a slow, flaky or hanging control plane:
added latency, a share of requests failing with 500, a share hanging past the client's
timeout, and every open watch dropped at once. Each rule may be limited to one verb and/or
resource and to the next N matching requests; rates draw from a seeded RNG so a run is
reproducible.

Cluster-side writes never pass through here; only HTTP requests do.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devstack.kube import errors

DEFAULT_HOLD_SECONDS = 30.0


@dataclass
class _Rule:
    """``effect`` is "error", "timeout" or "latency"."""

    effect: str
    rate: float = 1.0
    count: int | None = None
    verb: str | None = None
    resource: str | None = None
    seconds: float = 0.0
    code: int = 500

    def applies(self, verb: str, resource: str) -> bool:
        if self.count is not None and self.count <= 0:
            return False
        return (self.verb is None or self.verb == verb) and (
            self.resource is None or self.resource == resource
        )


@dataclass(frozen=True)
class Decision:
    """What to do to one request: wait ``delay`` first, then fail with ``error`` or hang
    for ``hold`` seconds (then drop the connection), or else serve it normally."""

    delay: float = 0.0
    error: errors.ApiError | None = None
    hold: float | None = None


NO_FAULT = Decision()


@dataclass
class Pause:
    """A request held on arrival until the test releases it (``release``), then served
    as usual: the moment to kill the client that sent it, as if the client died right after
    its request left. ``arrived`` is set when the request is being held."""

    verb: str
    resource: str
    namespace: str | None
    name: str | None
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def matches(self, verb: str, resource: str, namespace: str | None, name: str | None) -> bool:
        return (
            self.verb == verb
            and self.resource == resource
            and (self.namespace is None or self.namespace == namespace)
            and (self.name is None or self.name == name)
        )

    def release(self) -> None:
        self.released.set()


class RequestFaults:
    """The fault rules of one emulator; thread-safe."""

    def __init__(self, drop_watches: Callable[[], int], seed: int | None = 0) -> None:
        self._drop_watches = drop_watches
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._random = random.Random(seed)  # noqa: S311 - reproducible faults, not secrets
        self._released = threading.Event()
        self._pauses: list[Pause] = []

    # -- arming ----------------------------------------------------------------------------

    def add_latency(
        self, seconds: float, *, verb: str | None = None, resource: str | None = None
    ) -> None:
        """Delay every matching request by ``seconds``."""
        self._add(_Rule("latency", seconds=seconds, verb=verb, resource=resource))

    def fail(
        self,
        rate: float = 1.0,
        *,
        count: int | None = None,
        verb: str | None = None,
        resource: str | None = None,
        code: int = 500,
    ) -> None:
        """Answer a ``rate`` share (or the next ``count``) of matching requests with an error
        Status (500 InternalError unless ``code`` says otherwise)."""
        self._add(_Rule("error", rate=rate, count=count, verb=verb, resource=resource, code=code))

    def time_out(
        self,
        rate: float = 1.0,
        *,
        count: int | None = None,
        verb: str | None = None,
        resource: str | None = None,
        hold: float = DEFAULT_HOLD_SECONDS,
    ) -> None:
        """Hang a ``rate`` share (or the next ``count``) of matching requests for ``hold``
        seconds, longer than the client waits, then drop the connection unanswered."""
        self._add(
            _Rule("timeout", rate=rate, count=count, verb=verb, resource=resource, seconds=hold)
        )

    def pause_next(
        self,
        verb: str,
        resource: str,
        *,
        namespace: str | None = None,
        name: str | None = None,
    ) -> Pause:
        """Hold the next matching request on arrival until the returned ``Pause`` is
        released (or everything is cleared)."""
        pause = Pause(verb, resource, namespace, name)
        with self._lock:
            self._pauses.append(pause)
        return pause

    def claim_pause(
        self, verb: str, resource: str, namespace: str | None, name: str | None
    ) -> Pause | None:
        """The pause armed for this request, if any, now taken by it (each pause holds
        one request); the server then waits on ``hold``."""
        if not self._pauses:
            return None
        with self._lock:
            pause = next(
                (
                    p
                    for p in self._pauses
                    if not p.arrived.is_set() and p.matches(verb, resource, namespace, name)
                ),
                None,
            )
            if pause is not None:
                pause.arrived.set()
            return pause

    def hold(self, pause: Pause) -> None:
        """Wait until ``pause`` is released (``clear`` releases it too)."""
        pause.released.wait()
        self.cancel(pause)

    def cancel(self, pause: Pause) -> None:
        """Disarm ``pause`` (released, and no longer matching any request)."""
        pause.release()
        with self._lock:
            if pause in self._pauses:
                self._pauses.remove(pause)

    def drop_watches(self) -> int:
        """Close every open watch stream now; returns how many there were."""
        return self._drop_watches()

    def seed(self, seed: int | None) -> None:
        with self._lock:
            self._random.seed(seed)

    def clear(self) -> None:
        """Disarm everything and release requests being held."""
        with self._lock:
            self._rules = []
            for pause in self._pauses:
                pause.release()
            self._pauses = []
            self._released.set()
            self._released = threading.Event()

    def configure(self, spec: dict[str, Any]) -> None:
        """Arm faults from a JSON document (the ``PUT /_emulator/faults`` body).

        Keys: ``clear`` (bool, first), ``seed``, ``latency`` (seconds), ``error_rate``,
        ``timeout_rate``, ``fail_next`` / ``timeout_next`` (counts), ``verb``, ``resource``,
        ``code``, ``hold`` (seconds), ``drop_watches`` (bool).
        """
        scope = {"verb": spec.get("verb"), "resource": spec.get("resource")}
        if spec.get("clear"):
            self.clear()
        if "seed" in spec:
            self.seed(spec["seed"])
        if spec.get("latency"):
            self.add_latency(float(spec["latency"]), **scope)
        if spec.get("error_rate") or spec.get("fail_next"):
            self.fail(
                float(spec.get("error_rate", 1.0)),
                count=spec.get("fail_next"),
                code=int(spec.get("code", 500)),
                **scope,
            )
        if spec.get("timeout_rate") or spec.get("timeout_next"):
            self.time_out(
                float(spec.get("timeout_rate", 1.0)),
                count=spec.get("timeout_next"),
                hold=float(spec.get("hold", DEFAULT_HOLD_SECONDS)),
                **scope,
            )
        if spec.get("drop_watches"):
            self.drop_watches()

    def _add(self, rule: _Rule) -> None:
        with self._lock:
            self._rules = [*self._rules, rule]

    # -- applying --------------------------------------------------------------------------

    def decide(self, verb: str, resource: str) -> Decision:
        """The fault, if any, for one request; cheap when nothing is armed."""
        if not self._rules:
            return NO_FAULT
        delay = 0.0
        with self._lock:
            for rule in self._rules:
                if not rule.applies(verb, resource):
                    continue
                if rule.effect == "latency":
                    delay += rule.seconds
                    continue
                if rule.rate < 1.0 and self._random.random() >= rule.rate:
                    continue
                if rule.count is not None:
                    rule.count -= 1
                if rule.effect == "error":
                    error = (
                        errors.internal_error(f"injected fault: {verb} {resource} failed")
                        if rule.code == 500
                        else errors.ApiError(
                            rule.code, "InjectedFault", f"injected fault: {verb} {resource}"
                        )
                    )
                    return Decision(delay=delay, error=error)
                return Decision(delay=delay, hold=rule.seconds)
        return Decision(delay=delay) if delay else NO_FAULT

    def wait(self, seconds: float) -> None:
        """Sleep for a fault, cut short by :meth:`clear` (so teardown never waits on it)."""
        if seconds > 0:
            self._released.wait(seconds)

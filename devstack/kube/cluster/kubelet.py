"""The kubelets of every node: pull images, run init containers, start containers, stop pods.

Each pod's life on its node is a generator that yields how long it waits next (an image pull, a
container start, a back-off); the reactor resumes it when that time comes. Status is written
to the store at every wait and at the end, so a watcher sees each visible state (Pending with
``ContainerCreating``, ``ErrImagePull``, Running) while zero-length steps cost no extra writes.
"""

from __future__ import annotations

import copy
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from . import containers as cs
from . import nodes
from .cache import Obj, ObjectCache
from .clock import now_rfc3339
from .events import EventRecorder, kubelet
from .faults import PodFaults
from .images import Pull, PullTracker, add_image, image_id, node_has_image
from .podstatus import qos_class, set_condition
from .probes import UNSUPPORTED, Prober, readiness_probe
from .processes import ContainerConfigError, ProcessRuntime
from .programs import ImageProgram, program_for
from .reactor import Reactor, Timer
from .settings import ClusterSettings
from .writer import StoreWriter

DEFAULT_GRACE_SECONDS = 30
MIN_BACKOFF_SECONDS = 0.01
MAX_BACKOFF_DOUBLINGS = 5


@dataclass(frozen=True)
class Until:
    """Wait until this monotonic time (instead of for a number of seconds)."""

    due: float


class Parked:
    """Wait until something outside the kubelet (a process's exit) wakes the pod."""


PARKED = Parked()

Step = float | Until | Parked
Lifecycle = Generator[Step, None, None]


@dataclass
class PodRun:
    """A pod the kubelet of ``node`` is running, with the status it will write next."""

    pod: Obj
    node: str
    status: dict[str, Any]
    written: dict[str, Any] = field(default_factory=dict)
    lifecycle: Lifecycle | None = None
    timer: Timer | None = None
    parked: bool = False
    exits: list[tuple[str, int]] = field(default_factory=list)
    """Containers whose processes ended since the lifecycle last looked, with exit codes."""

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"].get("uid"))

    @property
    def spec(self) -> dict[str, Any]:
        return dict(self.pod.get("spec") or {})

    def container(self, kind: str, name: str) -> dict[str, Any]:
        key = "initContainerStatuses" if kind == "initContainers" else "containerStatuses"
        for status in self.status.get(key) or []:
            if status.get("name") == name:
                return status
        raise KeyError(name)


def default_pull_policy(image: str) -> str:
    """The API server's default: ``Always`` for ``:latest`` or untagged images."""
    name = image.split("@", 1)[0]
    if "@" in image:
        return "IfNotPresent"
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def field_path(kind: str, name: str) -> str:
    return f"spec.{kind}{{{name}}}"


class Kubelets:
    """One simulated kubelet per node, all sharing the reactor thread."""

    def __init__(
        self,
        cache: ObjectCache,
        writer: StoreWriter,
        events: EventRecorder,
        faults: PodFaults,
        settings: ClusterSettings,
        reactor: Reactor,
        runtime: ProcessRuntime,
    ) -> None:
        self._runtime = runtime
        self._prober = Prober()
        self._cache = cache
        self._writer = writer
        self._events = events
        self._faults = faults
        self._settings = settings
        self._reactor = reactor
        self._runs: dict[str, PodRun] = {}
        self._terminating: dict[str, Timer | None] = {}
        self._pulls = PullTracker()
        self._next_ip: dict[str, int] = {}

    # ---- store events -------------------------------------------------------------------

    def on_pod(self, event_type: str, pod: Obj) -> None:
        uid = str(pod["metadata"].get("uid"))
        if event_type == "DELETED":
            self._drop(uid)
            timer = self._terminating.pop(uid, None)
            if timer is not None:
                timer.cancel()
            self._release(pod)
            return
        if pod["metadata"].get("deletionTimestamp"):
            self._terminate(pod)
            return
        self._maybe_start(pod)

    def on_node(self, event_type: str, node: Obj) -> None:
        name = nodes.node_name(node)
        bound = [
            p for p in self._cache.all("pods") if (p.get("spec") or {}).get("nodeName") == name
        ]
        if event_type == "DELETED":
            # The pod garbage collector removes pods bound to a node that no longer exists.
            self._pulls.forget_node(name)
            for pod in bound:
                self._drop(str(pod["metadata"].get("uid")))
                meta = pod["metadata"]
                self._writer.delete(
                    "pods", meta.get("namespace"), meta["name"], uid=meta.get("uid")
                )
            return
        if nodes.is_ready(node):
            for pod in bound:
                if not pod["metadata"].get("deletionTimestamp"):
                    self._maybe_start(pod)

    def stop(self) -> None:
        self._prober.stop_all()
        self._runtime.stop_all()
        for uid in list(self._runs):
            self._drop(uid)
        for timer in self._terminating.values():
            if timer is not None:
                timer.cancel()
        self._terminating.clear()

    # ---- running a pod ------------------------------------------------------------------

    def _maybe_start(self, pod: Obj) -> None:
        uid = str(pod["metadata"].get("uid"))
        if uid in self._runs or uid in self._terminating:
            return
        node_name = (pod.get("spec") or {}).get("nodeName")
        node = self._cache.get("nodes", None, node_name) if node_name else None
        if node is None or not nodes.is_ready(node):
            return
        if (pod.get("status") or {}).get("phase", "Pending") != "Pending":
            return  # already running (for example, adopted after a restart of the cluster)
        run = PodRun(pod=pod, node=str(node_name), status=self._initial_status(pod, node))
        run.lifecycle = self._lifecycle(run)
        self._runs[uid] = run
        self._advance(run)

    def _initial_status(self, pod: Obj, node: Obj) -> dict[str, Any]:
        spec = pod.get("spec") or {}
        status = copy.deepcopy(pod.get("status") or {})
        host_ip = nodes.internal_ip(node)
        if self._programs(pod):
            pod_ip = self._runtime.addresses.take()  # processes listen on it
        elif spec.get("hostNetwork"):
            pod_ip = host_ip
        else:
            pod_ip = self._allocate_ip(node)
        inits = spec.get("initContainers") or []
        status.update(
            {
                "phase": "Pending",
                "hostIP": host_ip,
                "hostIPs": [{"ip": host_ip}],
                "podIP": pod_ip,
                "podIPs": [{"ip": pod_ip}],
                "startTime": now_rfc3339(),
                "qosClass": qos_class(spec),
                "containerStatuses": [
                    cs.initial_status(c, "PodInitializing" if inits else "ContainerCreating")
                    for c in spec.get("containers") or []
                ],
            }
        )
        if inits:
            status["initContainerStatuses"] = [
                cs.initial_status(c, "PodInitializing") for c in inits
            ]
        set_condition(status, "PodScheduled", True)
        self._derive(status, spec)
        return status

    def _programs(self, pod: Obj) -> dict[str, ImageProgram]:
        """The pod's containers that run as processes, by name (none: the pod is emulated)."""
        programs = self._settings.programs
        if not programs:
            return {}
        spec = pod.get("spec") or {}
        found = {}
        for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            program = program_for(programs, str(container.get("image") or ""))
            if program is not None:
                found[str(container.get("name"))] = program
        return found

    def _release(self, pod: Obj) -> None:
        """A pod that is gone: its processes killed, its directory and address given back."""
        uid = str(pod["metadata"].get("uid"))
        if not self._programs(pod):
            return
        self._prober.stop(uid)
        self._runtime.kill_pod(uid)
        self._runtime.forget_pod(uid)
        pod_ip = (pod.get("status") or {}).get("podIP")
        if pod_ip and str(pod_ip).startswith("127."):
            self._runtime.addresses.give_back(str(pod_ip))

    def _allocate_ip(self, node: Obj) -> str:
        name = nodes.node_name(node)
        cidr = str((node.get("spec") or {}).get("podCIDR") or "10.244.0.0/24")
        prefix = cidr.split("/", 1)[0].rsplit(".", 1)[0]
        host = self._next_ip.get(name, 1) % 253 + 1
        self._next_ip[name] = host
        return f"{prefix}.{host + 1}"

    def _wake(self, run: PodRun) -> None:
        """Resume a parked lifecycle (on the reactor thread)."""
        if self._runs.get(run.uid) is run and run.parked:
            self._advance(run)

    def _advance(self, run: PodRun) -> None:
        """Run the pod's lifecycle until it has to wait, then write its status and sleep."""
        run.timer = None
        run.parked = False
        while self._runs.get(run.uid) is run and run.lifecycle is not None:
            try:
                step = next(run.lifecycle)
            except StopIteration:
                run.lifecycle = None
                break
            if isinstance(step, Parked):
                self._flush(run)
                run.parked = True
                return
            now = self._reactor.now()
            due = step.due if isinstance(step, Until) else now + step
            if due > now:
                self._flush(run)
                if self._runs.get(run.uid) is run:
                    run.timer = self._reactor.call_at(due, lambda: self._advance(run))
                return
        if self._runs.get(run.uid) is run:
            self._flush(run)

    def _flush(self, run: PodRun) -> None:
        """Write the run's status if it changed; a pod that is gone ends the run."""
        self._derive(run.status, run.spec)
        if run.status == run.written:
            return
        status = copy.deepcopy(run.status)

        def write(pod: Obj) -> bool:
            if pod["metadata"].get("deletionTimestamp") or pod.get("status") == status:
                return False  # once deleting, the termination path owns the status
            pod["status"] = status
            return True

        meta = run.pod["metadata"]
        updated = self._writer.mutate(
            "pods", meta.get("namespace"), meta["name"], write, uid=run.uid
        )
        if updated is None:
            self._drop(run.uid)
            return
        run.pod = updated
        run.written = status

    def _drop(self, uid: str) -> None:
        self._prober.stop(uid)
        run = self._runs.pop(uid, None)
        if run is None:
            return
        if run.timer is not None:
            run.timer.cancel()
        if run.lifecycle is not None:
            run.lifecycle.close()

    @staticmethod
    def _derive(status: dict[str, Any], spec: dict[str, Any]) -> None:
        """Phase and conditions from the container statuses, as the kubelet computes them."""
        inits = status.get("initContainerStatuses") or []
        mains = status.get("containerStatuses") or []
        pending_inits = [
            s["name"]
            for s in inits
            if (s.get("state") or {}).get("terminated", {}).get("exitCode") != 0
        ]
        initialized = not pending_inits
        restart_policy = spec.get("restartPolicy") or "Always"
        finished = bool(mains) and all(cs.is_terminated(s) for s in mains)
        if finished and restart_policy != "Always":
            failed = any(s["state"]["terminated"].get("exitCode") != 0 for s in mains)
            status["phase"] = "Failed" if failed else "Succeeded"
        elif initialized and any(s.get("containerID") for s in mains):
            status["phase"] = "Running"
        else:
            status["phase"] = "Pending"
        set_condition(status, "PodReadyToStartContainers", True)
        if initialized:
            set_condition(status, "Initialized", True)
        else:
            message = f"containers with incomplete status: [{' '.join(pending_inits)}]"
            set_condition(status, "Initialized", False, "ContainersNotInitialized", message)
        unready = [s["name"] for s in mains if not s.get("ready")]
        if status["phase"] in ("Succeeded", "Failed"):
            for kind in ("ContainersReady", "Ready"):
                set_condition(status, kind, False, "PodCompleted")
        elif unready:
            message = f"containers with unready status: [{' '.join(unready)}]"
            for kind in ("ContainersReady", "Ready"):
                set_condition(status, kind, False, "ContainersNotReady", message)
        else:
            for kind in ("ContainersReady", "Ready"):
                set_condition(status, kind, True)

    # ---- the lifecycle ------------------------------------------------------------------

    def _lifecycle(self, run: PodRun) -> Lifecycle:
        spec = run.spec
        for container in spec.get("initContainers") or []:
            yield from self._run_init(run, container)
        for status in run.status.get("containerStatuses") or []:
            if (status.get("state") or {}).get("waiting", {}).get("reason") == "PodInitializing":
                cs.set_waiting(status, "ContainerCreating")
        mains = spec.get("containers") or []
        for container in mains:
            yield from self._pull(run, container, "containers")
            yield from self._create_and_start(
                run, container, "containers", ready=not self._crashes(container)
            )
        yield from self._supervise(run, mains)

    def _crashes(self, container: dict[str, Any]) -> bool:
        return self._faults.match("crash_loop", str(container.get("image") or "")) is not None

    def _backoff(self, attempt: int) -> float:
        base = max(self._settings.crash_backoff_seconds, MIN_BACKOFF_SECONDS)
        return float(base * 2 ** min(attempt, MAX_BACKOFF_DOUBLINGS))

    def _run_init(self, run: PodRun, container: dict[str, Any]) -> Lifecycle:
        """Init containers run to completion one at a time; a crashing one is restarted."""
        kind, name = "initContainers", str(container.get("name"))
        status = run.container(kind, name)
        attempt = 0
        program = self._programs(run.pod).get(name)
        while program is not None:
            yield from self._pull(run, container, kind)
            yield from self._start_process(run, container, kind, program)
            while not run.exits:
                yield PARKED
            _, code = run.exits.pop(0)
            cs.set_terminated(status, code)
            if code == 0:
                status["ready"] = True
                return
            yield from self._crash_back_off(run, container, kind, attempt)
            attempt += 1
        while True:
            yield from self._pull(run, container, kind)
            crashing = self._crashes(container)
            yield from self._create_and_start(run, container, kind, ready=False)
            if crashing:
                yield self._backoff(0)
                cs.set_terminated(status, 1)
                yield from self._crash_back_off(run, container, kind, attempt)
                attempt += 1
                continue
            if self._settings.init_seconds > 0:
                yield self._settings.init_seconds
            cs.set_terminated(status, 0)
            status["ready"] = True
            return

    def _supervise(self, run: PodRun, mains: list[dict[str, Any]]) -> Lifecycle:
        """After start: restart crashing containers with back-off, or let commands exit."""
        if self._programs(run.pod):
            yield from self._supervise_processes(run, mains)
            return
        attempt = 0
        while True:
            crashing = []
            for container in mains:
                status = run.container("containers", str(container.get("name")))
                if not cs.is_running(status):
                    continue
                if self._crashes(container):
                    crashing.append(container)
                else:
                    status["ready"] = True
            if not crashing:
                break
            yield self._backoff(0)  # the process runs briefly, then exits with an error
            for container in crashing:
                cs.set_terminated(run.container("containers", str(container.get("name"))), 1)
            for container in crashing:
                yield from self._crash_back_off(run, container, "containers", attempt)
            attempt += 1
        if attempt:
            return
        restart_policy = run.spec.get("restartPolicy") or "Always"
        exits = []
        for container in mains:
            plan = cs.planned_exit(container, restart_policy)
            if plan is not None:
                exits.append((plan.after, str(container.get("name")), plan.code))
        started = self._reactor.now()
        for after, name, code in sorted(exits):
            yield Until(started + after)
            cs.set_terminated(run.container("containers", name), code)

    def _supervise_processes(self, run: PodRun, mains: list[dict[str, Any]]) -> Lifecycle:
        """Containers run as processes: each exit is reported, and the container is started
        again as ``restartPolicy`` says, after a back-off that grows with each restart."""
        restart_policy = run.spec.get("restartPolicy") or "Always"
        by_name = {str(c.get("name")): c for c in mains}
        for container in mains:
            self._probe_readiness(run, container)
        while any(not cs.is_terminated(run.container("containers", n)) for n in by_name):
            if not run.exits:
                yield PARKED
                continue
            name, code = run.exits.pop(0)
            self._prober.stop(run.uid, name)
            status = run.container("containers", name)
            cs.set_terminated(status, code)
            restart = restart_policy == "Always" or (restart_policy == "OnFailure" and code)
            if restart:
                attempt = int(status.get("restartCount") or 0)
                yield from self._crash_back_off(run, by_name[name], "containers", attempt)
                self._probe_readiness(run, by_name[name])

    def _probe_readiness(self, run: PodRun, container: dict[str, Any]) -> None:
        """A started container is ready at once, or once its readiness probe passes."""
        name = str(container.get("name"))
        status = run.container("containers", name)
        if not cs.is_running(status):
            return
        source, path = kubelet(run.node), field_path("containers", name)
        kinds = set(container.get("readinessProbe") or {})
        skipped = sorted(kinds.intersection(UNSUPPORTED))
        try:
            probe = readiness_probe(
                container,
                str(run.status.get("podIP") or ""),
                lambda: self._runtime.running(run.uid),
            )
        except ContainerConfigError as exc:
            self._events.warning(
                run.pod, source, "Unhealthy", f"Readiness probe errored: {exc}", path
            )
            return
        if probe is None:
            if skipped:
                message = (
                    f"the local stack does not run {skipped[0]} probes: "
                    f"container {name} counts as ready"
                )
                self._events.normal(run.pod, source, "ProbeNotRun", message, path)
            status["ready"] = True
            return
        container_id = status.get("containerID")

        def verdict(ready: bool, why: str | None) -> None:
            def apply() -> None:
                current = run.container("containers", name)
                if self._runs.get(run.uid) is not run or current.get("containerID") != container_id:
                    return  # the pod or this start of the container is gone
                if not cs.is_running(current):
                    return
                current["ready"] = ready
                if not ready:
                    message = "Readiness probe failed" + (f": {why}" if why else "")
                    self._events.warning(run.pod, source, "Unhealthy", message, path)
                self._flush(run)

            self._reactor.submit(apply)

        self._prober.start(run.uid, name, probe, verdict)

    def _crash_back_off(
        self, run: PodRun, container: dict[str, Any], kind: str, attempt: int
    ) -> Lifecycle:
        """CrashLoopBackOff: wait a growing delay, then start the container again."""
        name = str(container.get("name"))
        status = run.container(kind, name)
        delay = self._backoff(attempt)
        meta = run.pod["metadata"]
        pod_ref = f"{meta['name']}_{meta.get('namespace')}({run.uid})"
        cs.remember_last_state(status)
        cs.set_waiting(
            status,
            "CrashLoopBackOff",
            f"back-off {delay:g}s restarting failed container={name} pod={pod_ref}",
        )
        self._events.warning(
            run.pod,
            kubelet(run.node),
            "BackOff",
            f"Back-off restarting failed container {name} in pod {pod_ref}",
            field_path(kind, name),
        )
        yield delay
        status["restartCount"] = int(status.get("restartCount") or 0) + 1
        if kind == "initContainers":
            return  # the init loop pulls and starts it again
        yield from self._pull(run, container, kind)
        yield from self._create_and_start(run, container, kind, ready=False)

    def _create_and_start(
        self, run: PodRun, container: dict[str, Any], kind: str, ready: bool
    ) -> Lifecycle:
        name = str(container.get("name"))
        status = run.container(kind, name)
        source, path = kubelet(run.node), field_path(kind, name)
        program = self._programs(run.pod).get(name)
        if program is not None:
            yield from self._start_process(run, container, kind, program)
            return
        self._events.normal(run.pod, source, "Created", f"Created container: {name}", path)
        if self._settings.start_seconds > 0:
            yield self._settings.start_seconds
        self._events.normal(run.pod, source, "Started", f"Started container {name}", path)
        cs.set_running(status, cs.new_container_id(), ready)

    def _start_process(
        self, run: PodRun, container: dict[str, Any], kind: str, program: ImageProgram
    ) -> Lifecycle:
        """Start the container as a process; a container that cannot be run waits in
        ``CreateContainerConfigError`` and is tried again after a back-off."""
        name = str(container.get("name"))
        status = run.container(kind, name)
        source, path = kubelet(run.node), field_path(kind, name)
        attempt = 0
        while True:
            pod = {**run.pod, "status": run.status}

            def exited(code: int, run: PodRun = run, name: str = name) -> None:
                def record() -> None:
                    run.exits.append((name, code))
                    self._wake(run)

                self._reactor.submit(record)

            try:
                self._runtime.start(
                    pod, container, program, int(status.get("restartCount") or 0), exited
                )
            except ContainerConfigError as exc:
                cs.set_waiting(status, "CreateContainerConfigError", str(exc))
                self._events.warning(run.pod, source, "Failed", f"Error: {exc}", path)
                yield self._backoff(attempt)
                attempt += 1
                continue
            self._events.normal(run.pod, source, "Created", f"Created container: {name}", path)
            self._events.normal(run.pod, source, "Started", f"Started container {name}", path)
            cs.set_running(status, cs.new_container_id(), ready=False)
            return

    # ---- images -------------------------------------------------------------------------

    def _pull(self, run: PodRun, container: dict[str, Any], kind: str) -> Lifecycle:
        """Make the container's image present on the node, as the pull policy asks."""
        reference = str(container.get("image") or "")
        name = str(container.get("name"))
        status = run.container(kind, name)
        source, path = kubelet(run.node), field_path(kind, name)
        policy = container.get("imagePullPolicy") or default_pull_policy(reference)
        attempt = 0
        while True:
            node = self._cache.get("nodes", None, run.node)
            if node is None:
                return
            digest = self._settings.resolve_digest(reference)
            fault = self._faults.match("image_pull", reference, run.node)
            present = node_has_image(node, reference, digest)
            if present and (policy != "Always" or fault is None):
                if policy != "Always":
                    message = f'Container image "{reference}" already present on machine'
                    self._events.normal(run.pod, source, "Pulled", message, path)
                else:
                    self._events.normal(
                        run.pod, source, "Pulling", f'Pulling image "{reference}"', path
                    )
                    self._pulled(run, reference, 0.0, path)
                self._record_image(run.node, reference, digest)
                status["imageID"] = image_id(reference, digest)
                return
            if policy == "Never":
                message = f'Container image "{reference}" is not present with pull policy of Never'
                cs.set_waiting(status, "ErrImageNeverPull", message)
                self._events.warning(run.pod, source, "ErrImageNeverPull", message, path)
                yield self._backoff(attempt)
                attempt += 1
                continue
            self._events.normal(run.pod, source, "Pulling", f'Pulling image "{reference}"', path)
            if fault is not None:
                yield from self._pull_failed(run, status, reference, fault.message, attempt, path)
                attempt += 1
                continue
            begun = self._reactor.now()
            pull = self._pulls.get(run.node, reference) or self._begin_pull(
                run.node, reference, digest
            )
            yield Until(pull.due)
            self._complete_pull(pull, digest)
            node = self._cache.get("nodes", None, run.node)
            if node is not None and node_has_image(node, reference, digest):
                self._pulled(run, reference, self._reactor.now() - begun, path)
                status["imageID"] = image_id(reference, digest)
                return

    def _pulled(self, run: PodRun, reference: str, seconds: float, path: str) -> None:
        size = self._settings.default_image_size
        message = (
            f'Successfully pulled image "{reference}" in {seconds:.3f}s '
            f"({seconds:.3f}s including waiting). Image size: {size} bytes."
        )
        self._events.normal(run.pod, kubelet(run.node), "Pulled", message, path)

    def _pull_failed(
        self,
        run: PodRun,
        status: dict[str, Any],
        reference: str,
        message: str | None,
        attempt: int,
        path: str,
    ) -> Lifecycle:
        """ErrImagePull, then ImagePullBackOff, then (after the back-off) another try."""
        error = message or (
            f'rpc error: code = NotFound desc = failed to pull and unpack image "{reference}": '
            f'failed to resolve reference "{reference}": {reference}: not found'
        )
        source = kubelet(run.node)
        self._events.warning(
            run.pod, source, "Failed", f'Failed to pull image "{reference}": {error}', path
        )
        self._events.warning(run.pod, source, "Failed", "Error: ErrImagePull", path)
        cs.set_waiting(status, "ErrImagePull", error)
        yield self._backoff(attempt)
        self._events.normal(
            run.pod, source, "BackOff", f'Back-off pulling image "{reference}"', path
        )
        self._events.warning(run.pod, source, "Failed", "Error: ImagePullBackOff", path)
        cs.set_waiting(
            status,
            "ImagePullBackOff",
            f'Back-off pulling image "{reference}": ErrImagePull: {error}',
        )
        yield self._backoff(attempt + 1)

    def _begin_pull(self, node: str, reference: str, digest: str | None) -> Pull:
        now = self._reactor.now()
        pull = self._pulls.begin(node, reference, now, now + self._settings.pull_time(reference))
        # The pull finishes even if the pod that started it goes away meanwhile.
        self._reactor.call_at(pull.due, lambda: self._complete_pull(pull, digest))
        return pull

    def _complete_pull(self, pull: Pull, digest: str | None) -> None:
        if self._pulls.get(pull.node, pull.reference) is not pull:
            return
        self._pulls.finish(pull)
        self._record_image(pull.node, pull.reference, digest)

    def _record_image(self, node: str, reference: str, digest: str | None) -> None:
        cached = self._cache.get("nodes", None, node)
        if cached is None:
            return
        probe = copy.deepcopy(cached)
        if not add_image(probe, reference, digest, self._settings.default_image_size):
            return
        size = self._settings.default_image_size
        self._writer.mutate("nodes", None, node, lambda n: add_image(n, reference, digest, size))

    # ---- deletion -----------------------------------------------------------------------

    def _terminate(self, pod: Obj) -> None:
        """A deleted pod: stop its containers, then remove it after the grace period."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid = str(meta.get("uid"))
        if uid in self._terminating:
            return
        self._drop(uid)
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
        if self._runtime.running(uid):
            self._terminating[uid] = None
            self._stop_containers(pod, str(spec.get("nodeName")))
            self._runtime.stop_pod(uid, float(grace))
            self._remove_when_stopped(pod)
            return
        delay = min(self._settings.pod_termination_seconds, float(grace))
        node = spec.get("nodeName")
        if delay <= 0 or not node or self._cache.get("nodes", None, node) is None:
            self._terminating[uid] = None
            self._remove(pod)
            return
        self._stop_containers(pod, str(node))
        self._terminating[uid] = self._reactor.call_later(delay, lambda: self._remove(pod))

    def _stop_containers(self, pod: Obj, node: str) -> None:
        running = [
            s for s in (pod.get("status") or {}).get("containerStatuses") or [] if cs.is_running(s)
        ]
        for status in running:
            name = str(status.get("name"))
            path = field_path("containers", name)
            self._events.normal(pod, kubelet(node), "Killing", f"Stopping container {name}", path)

        def stop(current: Obj) -> bool:
            status = current.setdefault("status", {})
            if not status.get("containerStatuses"):
                return False  # never started here: nothing to stop
            for container in status.get("containerStatuses") or []:
                if cs.is_running(container):
                    cs.set_terminated(container, 0)
                container["ready"] = False
            self._derive(status, current.get("spec") or {})
            return True

        meta = pod["metadata"]
        self._writer.mutate("pods", meta.get("namespace"), meta["name"], stop, uid=meta.get("uid"))

    def _remove_when_stopped(self, pod: Obj) -> None:
        """Remove the pod once its processes have all ended (within their grace period)."""
        uid = str(pod["metadata"].get("uid"))
        if self._runtime.running(uid):
            self._terminating[uid] = self._reactor.call_later(
                0.02, lambda: self._remove_when_stopped(pod)
            )
            return
        self._remove(pod)

    def _remove(self, pod: Obj) -> None:
        meta = pod["metadata"]
        self._writer.delete("pods", meta.get("namespace"), meta["name"], uid=meta.get("uid"))

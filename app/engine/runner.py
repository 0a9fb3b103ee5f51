"""Runs operations, in whichever process holds the workload's lease.

An operation is a record in Redis, not a thread. A process that runs operations and queued
one starts running it at once; a web process publishes a notice instead
(``app.storage.operation_notices``), which every runner receives here (``on_message``) and
the one that takes the lease runs. It renews the lease in Redis while it works. If that
process dies, the lease expires and another runner's scanner picks the operation up and
runs its idempotent steps again; the scanner also catches up at once whenever the notices'
subscription holds again, as notices sent in a gap are lost. A runner that finds its
operation superseded (a delete during a spawn) moves straight on to the new operation while
it still holds the lease.

With fair admission on (``app.engine.admission``), a spawn waiting for a place is never
started here, however the runner comes across it; when an admitted operation ends, the
runner gives its place back and takes what that admits, and its scanner runs an admission
pass on every scan.

Leases and slots stay inside the runner: kinds only see ``Run``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping

import redis

from app import metrics
from app.concurrency import start_task
from app.engine.admission import Admission
from app.engine.kind import Finished, Run, RunWorkloads, StepFailed, WorkloadKind
from app.engine.reporter import DeadlineExceeded, HandedOver, Reporter, Superseded
from app.log import logging_context
from app.metrics import FailureReason, Outcome
from app.models.workload import Action, Operation, WorkloadRef
from app.storage.events import EventStore, EventType
from app.storage.kubernetes import KubernetesError
from app.storage.leader import RedisLease, WorkerName
from app.storage.operation_notices import OperationNotices
from app.storage.workloads import WorkloadStore

logger = logging.getLogger(__name__)

_COMPLETE = [(EventType.PROGRESS, "100"), (EventType.COMPLETE, "")]
"""The events that end a successful operation, announced with its final record after what
its steps kept for the end (``Reporter.at_end``)."""


class _Slot:
    """One of the runner's slots, as a task holds it: taken to run an operation, given up
    when that operation starts waiting on Kubernetes (``Run.waiting``) and not taken back
    for it. What follows a wait is a few writes; an operation that took its slot back would
    queue behind operations only starting, and every spawn of a storm would finish last."""

    def __init__(self, slots: threading.BoundedSemaphore) -> None:
        self._slots = slots
        self.held = False

    def take(self, *, blocking: bool = True) -> bool:
        if not self.held:
            self.held = self._slots.acquire(blocking=blocking)
        return self.held

    def give_up(self) -> None:
        if self.held:
            self.held = False
            self._slots.release()

    @contextlib.contextmanager
    def given_up(self) -> Iterator[None]:
        """``Run.waiting``: the slot goes to another operation for the rest of this one."""
        self.give_up()
        yield


class OperationRunner:
    """Executes operations of workloads whose lease this process holds. It is also the
    event hub's listener of the notices channel (``channel``), in processes that run
    operations."""

    def __init__(
        self,
        *,
        store: WorkloadStore,
        events: EventStore,
        kinds: Mapping[str, WorkloadKind],
        lease_seconds: float = 10.0,
        scan_seconds: float = 2.0,
        max_concurrent: int = 32,
        owner: str | None = None,
        admission: Admission | None = None,
        notices_channel: str = "",
    ) -> None:
        self.channel = notices_channel
        self._store = store
        self._admission = admission
        self._events = events
        self._kinds = kinds
        self._lease_seconds = lease_seconds
        self._scan_seconds = scan_seconds
        self._owner = owner
        self._name = WorkerName()
        self._stopping = threading.Event()
        self._scan_now = threading.Event()
        """Set to scan before the period ends: the notices' subscription holds again."""
        self._scanner: threading.Thread | None = None
        self._active: dict[WorkloadRef, bool] = {}
        """Workloads whose operations a task here runs, and whether it was asked to look
        again before it ends."""
        self._active_lock = threading.Lock()
        # Past a few dozen concurrent operations a worker only slows every one of them
        # (and its request handling) down; the rest wait here without holding their lease,
        # so another worker's scanner can take them.
        self._slots = threading.BoundedSemaphore(max_concurrent)

    @property
    def owner(self) -> str:
        """Whom the leases this runner takes name: the owner given, else this process."""
        return self._owner or str(self._name)

    # Lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        self._scanner = threading.Thread(target=self._scan, name="operation-scanner", daemon=True)
        self._scanner.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop taking work and hand over what runs here: each running operation ends at
        its next check (``HandedOver``) and releases its lease, which another worker's
        scanner then finds free. Waits up to ``timeout`` for that, so that the leases are
        released before the process exits rather than left to expire."""
        self._stopping.set()
        self._scan_now.set()
        if self._scanner is not None:
            self._scanner.join(timeout=timeout)
        deadline = time.monotonic() + timeout
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.05)

    def running(self) -> int:
        """How many workloads a task here is running operations for."""
        with self._active_lock:
            return len(self._active)

    def submit(self, ref: WorkloadRef) -> None:
        """Run ``ref``'s operations here, unless another worker has them; if a task here
        already does, it looks once more before it ends (and takes the lease again)."""
        if ref.kind not in self._kinds:
            raise ValueError(f"no workload kind {ref.kind!r} is registered")
        if self._claim(ref):
            start_task(self._run_workload, ref, name=f"op-{ref.key}")

    def _claim(self, ref: WorkloadRef) -> bool:
        """Mark ``ref`` as run by a task here; False (and that task asked to look once more)
        if one already runs it."""
        with self._active_lock:
            if ref in self._active:
                self._active[ref] = True
                return False
            self._active[ref] = False
        return True

    # Finding work --------------------------------------------------------------------

    def on_message(self, payload: str) -> None:
        """A notice: a web process queued an operation of the workload it names."""
        ref = OperationNotices.parse(payload)
        # Another replica may run kinds this one does not know (yet).
        if ref is not None and ref.kind in self._kinds and not self._stopping.is_set():
            self.submit(ref)

    def on_subscription(self, active: bool) -> None:
        """Notices sent while the subscription was down are lost: scan at once when it
        holds again (the first time too, for what was queued before this process started)."""
        if active:
            self._scan_now.set()

    def _scan(self) -> None:
        """Adopt operations whose runner died (their lease expired) or whose notice was
        lost, after an admission pass (which heals what a runner dying between two steps
        left undone)."""
        while True:
            self._scan_now.wait(self._scan_seconds)
            self._scan_now.clear()
            if self._stopping.is_set():
                return
            try:
                if self._admission is not None:
                    self.admit()
                for ref in self._store.pending():
                    # Another replica may run kinds this one does not know (yet).
                    if ref.kind in self._kinds and self._store.lease_holder(ref) is None:
                        self.submit(ref)
            except redis.RedisError as exc:
                logger.warning("operation scan skipped: Redis unavailable (%s)", type(exc).__name__)
            except Exception:
                logger.exception("operation scan failed")

    def _run_workload(self, ref: WorkloadRef) -> None:
        lease = self._store.lease(ref, self.owner, self._lease_seconds)
        try:
            while True:
                self._run_while_available(ref, lease)
                if self._done(ref):
                    return
        except redis.RedisError as exc:
            # Redis went away mid-run (a failover): the operation stays pending, and a
            # scanner resumes it once its lease expires.
            logger.warning(
                "running operations of %s stopped: Redis unavailable (%s)",
                ref.key,
                type(exc).__name__,
            )
            with self._active_lock:
                self._active.pop(ref, None)
        except Exception:
            logger.exception("running operations of %s failed", ref.key)
            with self._active_lock:
                self._active.pop(ref, None)

    def _run_while_available(self, ref: WorkloadRef, lease: RedisLease) -> None:
        """Run the workload's operations while this worker can take their lease."""
        slot = _Slot(self._slots)
        slot.take()
        try:
            # A stopping worker leaves what is pending to the others.
            while not self._stopping.is_set() and lease.acquire():
                try:
                    self._run_while_leased(ref, lease, slot)
                finally:
                    lease.release()
                # An operation queued while we were letting go would otherwise wait
                # for the scanner; look once more.
                if not self._runnable(ref):
                    break
        finally:
            slot.give_up()

    def _done(self, ref: WorkloadRef) -> bool:
        """End this task's turn for ``ref``, unless it was asked to look again."""
        with self._active_lock:
            if self._active.get(ref):
                self._active[ref] = False
                return False
            self._active.pop(ref, None)
            return True

    def _run_while_leased(self, ref: WorkloadRef, lease: RedisLease, slot: _Slot) -> None:
        lost = threading.Event()
        done = threading.Event()

        def heartbeat() -> None:
            while not done.wait(self._lease_seconds / 3):
                if not lease.renew():
                    lost.set()
                    return

        start_task(heartbeat, name=f"lease-{ref.key}")
        try:
            while not lost.is_set() and not self._stopping.is_set():
                queued = self._store.operation_and_secret(ref)
                if queued.operation is None or self._held(queued.operation):
                    return
                # Each operation starts holding a slot (its predecessor may have given it up).
                slot.take()
                self._execute(queued.operation, queued.secret, slot)
        finally:
            done.set()

    # Admission ---------------------------------------------------------------------

    def admit(self, *, ended: Operation | None = None, withdraw: WorkloadRef | None = None) -> None:
        """Run an admission pass (see ``Admission.admit``) and take what it admitted here.
        A failure only delays admission until the next scan, which runs a pass again."""
        if self._admission is None:
            return
        try:
            admitted = self._admission.admit(ended=ended, withdraw=withdraw)
        except redis.RedisError as exc:
            logger.warning("admission pass skipped: Redis unavailable (%s)", type(exc).__name__)
            return
        for ref in admitted:
            if ref.kind in self._kinds:
                self.submit(ref)

    def _admits(self, operation: Operation) -> bool:
        """Whether ``operation`` may hold a place: a spawn of an admitted kind, with
        admission on."""
        admission = self._admission
        return (
            admission is not None
            and admission.enabled
            and operation.action is Action.SPAWN
            and self._kinds[operation.ref.kind].admitted
        )

    def _held(self, operation: Operation) -> bool:
        """Whether ``operation`` waits for a place, so that no runner may start it yet."""
        return (
            self._admits(operation)
            and self._admission is not None
            and self._admission.is_waiting(operation)
        )

    def _runnable(self, ref: WorkloadRef) -> bool:
        """Whether ``ref`` has an operation a runner may run now."""
        operation = self._store.operation(ref)
        return operation is not None and not self._held(operation)

    # Running one operation -----------------------------------------------------------

    def _execute(self, operation: Operation, secret: str | None, slot: _Slot) -> None:
        # Every log line and event of the run names the operation and the request that
        # queued it, whichever worker of whichever replica runs it.
        with logging_context(
            request_id=operation.request_id,
            operation=operation.id,
            workload=operation.ref.key,
        ):
            try:
                self._execute_steps(operation, secret, slot)
            finally:
                if self._admits(operation):
                    # Its place goes back only if it ended (or was superseded): one that a
                    # stopping worker left to be resumed keeps it.
                    self.admit(ended=operation)

    def _execute_steps(self, operation: Operation, secret: str | None, slot: _Slot) -> None:
        kind = self._kinds[operation.ref.kind]
        reporter = Reporter(
            operation, store=self._store, events=self._events, stopping=self._stopping
        )
        run = Run(
            operation, reporter, secret, RunWorkloads(self._store, operation), waiting=slot.given_up
        )
        try:
            steps = kind.spawn if operation.action is Action.SPAWN else kind.delete
            finished = steps(run)
        except Superseded:
            logger.info("operation %s of %s superseded", operation.id, operation.ref.key)
            _observe(operation, Outcome.SUPERSEDED)
            return
        except HandedOver:
            # Its lease is released on the way out; another worker's scanner resumes it.
            logger.info(
                "%s of %s handed over: this worker is stopping",
                operation.action.value,
                operation.ref.key,
            )
            return
        except (StepFailed, DeadlineExceeded, KubernetesError) as exc:
            self._fail(kind, run, _failure_message(exc, operation.action, kind), _reason(exc))
            return
        self._succeed(run, finished)

    def _succeed(self, run: Run, finished: Finished) -> None:
        operation = run.operation
        ending = [*run.reporter.ending_events(), *_COMPLETE]
        announce = self._events.announcement(operation.ref.key, ending)
        if self._store.finish(operation=operation, record=finished.record, events=announce):
            logger.info("%s of %s done", operation.action.value, operation.ref.key)
            _observe(operation, Outcome.SUCCEEDED)
        else:
            _observe(operation, Outcome.SUPERSEDED)

    def _fail(self, kind: WorkloadKind, run: Run, message: str, reason: FailureReason) -> None:
        operation = run.operation
        logger.warning("%s of %s failed: %s", operation.action.value, operation.ref.key, message)
        record = kind.failed_record(run, message)
        announce = self._events.announcement(
            operation.ref.key, [(EventType.ERROR, message), (EventType.FAILED, message)]
        )
        if self._store.finish(operation=operation, record=record, events=announce):
            _observe(operation, Outcome.FAILED, reason)
        else:
            _observe(operation, Outcome.SUPERSEDED)


def _observe(operation: Operation, outcome: Outcome, reason: FailureReason | None = None) -> None:
    """Count the operation's end (once: only the run whose final write counted gets here
    with that outcome; a superseded run's successor counts its own)."""
    action = operation.action.value
    metrics.observe_operation(operation.ref.kind, action, outcome, operation.started, reason)


def _reason(exc: Exception) -> FailureReason:
    """The failure's reason for the metrics: a step names its own."""
    if isinstance(exc, DeadlineExceeded):
        return FailureReason.TIMEOUT
    if isinstance(exc, KubernetesError):
        return FailureReason.KUBERNETES_ERROR
    return exc.reason if isinstance(exc, StepFailed) else FailureReason.OTHER


def _failure_message(exc: Exception, action: Action, kind: WorkloadKind) -> str:
    """What a user reads when an operation fails: the step's own words, or what ran out."""
    if isinstance(exc, DeadlineExceeded):
        return f"the {action.value} did not finish within {kind.timeout(action):g} seconds"
    if isinstance(exc, KubernetesError):
        return f"Kubernetes error during the {action.value}: {exc.message}"
    return str(exc)

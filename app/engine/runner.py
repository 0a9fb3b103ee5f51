"""Runs operations, in whichever worker holds the workload's lease.

An operation is a record in Redis, not a thread. The worker that queued it starts running
it at once, renewing a lease in Redis while it works. If that worker dies, the lease
expires and another worker's scanner picks the operation up and runs its idempotent steps
again. A worker that finds its operation superseded (a delete during a spawn) moves
straight on to the new operation while it still holds the lease.

Leases and slots stay inside the runner: kinds only see ``Run``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

import redis

from app.engine.concurrency import start_task
from app.engine.kind import Finished, Run, StepFailed, WorkloadKind
from app.engine.reporter import DeadlineExceeded, Reporter, Superseded
from app.engine.workload import Action, Operation, WorkloadRef
from app.storage.events import EventStore, EventType
from app.storage.kubernetes import KubernetesError
from app.storage.leader import RedisLease, worker_identity
from app.storage.workloads import LeaseRequest, WorkloadStore

logger = logging.getLogger(__name__)

_COMPLETE = [(EventType.PROGRESS, "100"), (EventType.COMPLETE, "")]
"""The events that end a successful operation, announced with its final record."""


@dataclass(frozen=True)
class HandOff:
    """An operation its caller queued together with this runner's lease on the workload
    (``lease_request``): it runs at once, without asking Redis for what was just written."""

    operation: Operation
    secret: str | None


class OperationRunner:
    """Executes operations of workloads whose lease this process holds."""

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
    ) -> None:
        self._store = store
        self._events = events
        self._kinds = kinds
        self._lease_seconds = lease_seconds
        self._scan_seconds = scan_seconds
        self.owner = owner or worker_identity()
        self._stopping = threading.Event()
        self._scanner: threading.Thread | None = None
        self._active: dict[WorkloadRef, bool] = {}
        """Workloads whose operations a task here runs, and whether it was asked to look
        again before it ends."""
        self._active_lock = threading.Lock()
        # Past a few dozen concurrent operations a worker only slows every one of them
        # (and its request handling) down; the rest wait here without holding their lease,
        # so another worker's scanner can take them.
        self._slots = threading.BoundedSemaphore(max_concurrent)

    # Lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        self._scanner = threading.Thread(target=self._scan, name="operation-scanner", daemon=True)
        self._scanner.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._scanner is not None:
            self._scanner.join(timeout=5)

    def lease_request(self) -> LeaseRequest:
        """The lease a caller asks for with an operation it queues, for ``submit``'s
        ``handoff``."""
        return LeaseRequest(self.owner, int(self._lease_seconds * 1000))

    def submit(self, ref: WorkloadRef, handoff: HandOff | None = None) -> None:
        """Run ``ref``'s operations here, unless another worker has them; if a task here
        already does, it looks once more before it ends (and takes the lease again)."""
        if ref.kind not in self._kinds:
            raise ValueError(f"no workload kind {ref.kind!r} is registered")
        with self._active_lock:
            if ref in self._active:
                self._active[ref] = True
                return
            self._active[ref] = False
        start_task(self._run_workload, ref, handoff, name=f"op-{ref.key}")

    # Finding work --------------------------------------------------------------------

    def _scan(self) -> None:
        """Adopt operations whose worker died (their lease expired)."""
        while not self._stopping.wait(self._scan_seconds):
            try:
                for ref in self._store.pending():
                    # Another replica may run kinds this one does not know (yet).
                    if ref.kind in self._kinds and self._store.lease_holder(ref) is None:
                        self.submit(ref)
            except redis.RedisError as exc:
                logger.warning("operation scan skipped: Redis unavailable (%s)", type(exc).__name__)
            except Exception:
                logger.exception("operation scan failed")

    def _run_workload(self, ref: WorkloadRef, handoff: HandOff | None) -> None:
        lease = self._store.lease(ref, self.owner, self._lease_seconds)
        try:
            look = True
            if handoff is not None:
                look = self._run_handoff(ref, lease, handoff)
            while True:
                if look:
                    self._run_while_available(ref, lease)
                if self._done(ref):
                    return
                look = True
        except Exception:
            logger.exception("running operations of %s failed", ref.key)
            with self._active_lock:
                self._active.pop(ref, None)

    def _run_handoff(self, ref: WorkloadRef, lease: RedisLease, handoff: HandOff) -> bool:
        """Run the handed-off operation, whose lease this task holds, if a slot is free (if
        not, the lease goes back for a worker with room). True if another operation may
        be waiting."""
        if self._slots.acquire(blocking=False):
            try:
                self._run_while_leased(ref, lease, handoff)
            finally:
                lease.release()
                self._slots.release()
        else:
            lease.release()
        # One queued while we let go would otherwise wait for the scanner.
        return self._store.operation(ref) is not None

    def _run_while_available(self, ref: WorkloadRef, lease: RedisLease) -> None:
        """Run the workload's operations while this worker can take their lease."""
        with self._slots:
            # A stopping worker leaves what is pending to the others.
            while not self._stopping.is_set() and lease.acquire():
                try:
                    self._run_while_leased(ref, lease, None)
                finally:
                    lease.release()
                # An operation queued while we were letting go would otherwise wait
                # for the scanner; look once more.
                if self._store.operation(ref) is None:
                    break

    def _done(self, ref: WorkloadRef) -> bool:
        """End this task's turn for ``ref``, unless it was asked to look again."""
        with self._active_lock:
            if self._active.get(ref):
                self._active[ref] = False
                return False
            self._active.pop(ref, None)
            return True

    def _run_while_leased(self, ref: WorkloadRef, lease: RedisLease, first: HandOff | None) -> None:
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
                if first is not None:
                    self._execute(first.operation, first.secret)
                    first = None
                    continue
                queued = self._store.operation_and_secret(ref)
                if queued.operation is None:
                    return
                self._execute(queued.operation, queued.secret)
        finally:
            done.set()

    # Running one operation -----------------------------------------------------------

    def _execute(self, operation: Operation, secret: str | None) -> None:
        kind = self._kinds[operation.ref.kind]
        reporter = Reporter(operation, store=self._store, events=self._events)
        run = Run(operation, reporter, secret)
        try:
            steps = kind.spawn if operation.action is Action.SPAWN else kind.delete
            finished = steps(run)
        except Superseded:
            logger.info("operation %s of %s superseded", operation.id, operation.ref.key)
            return
        except (StepFailed, DeadlineExceeded, KubernetesError) as exc:
            self._fail(kind, run, _failure_message(exc, operation.action, kind))
            return
        self._succeed(run, finished)

    def _succeed(self, run: Run, finished: Finished) -> None:
        operation = run.operation
        announce = self._events.announcement(operation.ref.key, [*finished.events, *_COMPLETE])
        if self._store.finish(operation=operation, record=finished.record, events=announce):
            logger.info("%s of %s done", operation.action.value, operation.ref.key)

    def _fail(self, kind: WorkloadKind, run: Run, message: str) -> None:
        operation = run.operation
        logger.warning("%s of %s failed: %s", operation.action.value, operation.ref.key, message)
        record = kind.failed_record(run, message)
        announce = self._events.announcement(
            operation.ref.key, [(EventType.ERROR, message), (EventType.FAILED, message)]
        )
        self._store.finish(operation=operation, record=record, events=announce)


def _failure_message(exc: Exception, action: Action, kind: WorkloadKind) -> str:
    """What a user reads when an operation fails: the step's own words, or what ran out."""
    if isinstance(exc, DeadlineExceeded):
        return f"the {action.value} did not finish within {kind.timeout(action):g} seconds"
    if isinstance(exc, KubernetesError):
        return f"Kubernetes error during the {action.value}: {exc.message}"
    return str(exc)

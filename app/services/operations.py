"""Runs spawn and delete operations, in whichever worker holds the user's lease.

An operation is a record in Redis, not a thread: the worker that accepted the request starts
running it at once, renewing a lease in Redis while it works. If that worker dies, the
lease expires and another worker's scanner picks the operation up and runs its idempotent
steps again. A worker that finds its operation superseded (a delete during a spawn) moves
straight on to the new operation while it still holds the lease.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass

import redis

from app.models.lab import LabStatus, Operation, OperationKind
from app.services.concurrency import give_way, start_task, yield_to_io
from app.services.context import LabContext
from app.services.delete import run_delete
from app.services.reporter import DeadlineExceeded, Reporter, Superseded
from app.services.spawn import HeadStart, SpawnFailed, failed_record, run_spawn
from app.storage.events import EventType
from app.storage.kubernetes import KubernetesError
from app.storage.labs import LeaseClaim
from app.storage.leader import RedisLease

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Claimed:
    """An operation queued with this worker's lease, to run at once."""

    operation: Operation
    token: str | None
    head_start: HeadStart | None


def worker_identity() -> str:
    """Unique per process: host, pid and a random suffix (pids repeat across replicas)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class OperationRunner:
    """Executes operations for users whose lease this process holds."""

    def __init__(
        self,
        ctx: LabContext,
        *,
        lease_seconds: float = 10.0,
        scan_seconds: float = 2.0,
        max_concurrent: int = 32,
        owner: str | None = None,
    ) -> None:
        self._ctx = ctx
        self._lease_seconds = lease_seconds
        self._scan_seconds = scan_seconds
        self.owner = owner or worker_identity()
        self._stopping = threading.Event()
        self._scanner: threading.Thread | None = None
        self._active: dict[str, bool] = {}
        """Users whose operations a thread here runs, and whether it was asked to look again."""
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

    def submit(self, username: str) -> None:
        """Run ``username``'s operations here, unless another worker has them; if a thread
        here already does, it looks once more before it ends."""
        with self._active_lock:
            if username in self._active:
                self._active[username] = True
                return
            self._active[username] = False
        self._start(username, None)

    def claim(self, username: str) -> LeaseClaim | None:
        """Reserve a slot to run ``username``'s next operation here at once.

        The caller queues the operation together with the returned lease, then calls
        ``run_claimed`` if the lease was taken and ``release_claim`` if not. None when
        no slot is free or a thread here already runs the user's operations.
        """
        with self._active_lock:
            if username in self._active or not self._slots.acquire(blocking=False):
                return None
            self._active[username] = False
        return LeaseClaim(self.owner, int(self._lease_seconds * 1000))

    def run_claimed(
        self, operation: Operation, token: str | None, head_start: HeadStart | None = None
    ) -> None:
        """Run ``operation``, queued with this worker's lease on a claimed slot: its first
        Kubernetes call goes out without another Redis round trip, and before the caller
        (the spawn request) goes on to write its answer."""
        self._start(operation.username, _Claimed(operation, token, head_start))
        # Two turns: in the first the operation sends its first call and starts tasks for
        # the calls beside it; in the second those send theirs. The answer (and the event
        # stream the client opens next) then waits on the API server with them.
        give_way(turns=2)

    def release_claim(self, username: str) -> None:
        """Give back a claim whose operation was not started (a conflict, or no lease)."""
        with self._active_lock:
            self._active.pop(username, None)
        self._slots.release()

    # Internals -----------------------------------------------------------------------

    def _start(self, username: str, claimed: _Claimed | None) -> None:
        start_task(self._run_user, username, claimed, name=f"op-{username}")

    def _scan(self) -> None:
        """Adopt operations whose worker died (their lease expired)."""
        while not self._stopping.wait(self._scan_seconds):
            try:
                for username in self._ctx.labs.pending_operations():
                    if self._ctx.labs.lease_holder(username) is None:
                        self.submit(username)
            except redis.RedisError as exc:
                logger.warning("operation scan skipped: Redis unavailable (%s)", type(exc).__name__)
            except Exception:
                logger.exception("operation scan failed")

    def _run_user(self, username: str, claimed: _Claimed | None) -> None:
        lease = self._ctx.labs.lease(username, self.owner, self._lease_seconds)
        try:
            look = True
            if claimed is not None:
                # The lease and a slot were taken with the operation.
                try:
                    self._run_while_leased(username, lease, claimed)
                finally:
                    lease.release()
                    self._slots.release()
                look = self._ctx.labs.operation(username) is not None
            while True:
                if look:
                    self._run_available(username, lease)
                if self._done(username):
                    return
                look = True
        except Exception:
            logger.exception("running operations for %s failed", username)
            with self._active_lock:
                self._active.pop(username, None)

    def _run_available(self, username: str, lease: RedisLease) -> None:
        """Run the user's operations while this worker can take their lease."""
        with self._slots:
            # A stopping worker leaves what is pending to the others.
            while not self._stopping.is_set() and lease.acquire():
                try:
                    self._run_while_leased(username, lease, None)
                finally:
                    lease.release()
                # An operation queued while we were letting go would otherwise wait
                # for the scanner; look once more.
                if self._ctx.labs.operation(username) is None:
                    break

    def _done(self, username: str) -> bool:
        """End this thread's turn for ``username``, unless it was asked to look again."""
        with self._active_lock:
            if self._active.get(username):
                self._active[username] = False
                return False
            self._active.pop(username, None)
            return True

    def _run_while_leased(
        self,
        username: str,
        lease: RedisLease,
        first: _Claimed | None,
    ) -> None:
        lost = threading.Event()
        done = threading.Event()

        def heartbeat() -> None:
            while not done.wait(self._lease_seconds / 3):
                if not lease.renew():
                    lost.set()
                    return

        start_task(heartbeat, name=f"lease-{username}")
        try:
            while not lost.is_set() and not self._stopping.is_set():
                if first is not None:
                    self._execute(first.operation, first.token, first.head_start)
                    first = None
                    continue
                operation, token = self._ctx.labs.operation_and_token(username)
                if operation is None:
                    return
                self._execute(operation, token, None)
        finally:
            done.set()

    def _execute(
        self, operation: Operation, token: str | None, head_start: HeadStart | None
    ) -> None:
        reporter = Reporter(self._ctx, operation)
        try:
            if operation.kind == OperationKind.SPAWN:
                self._spawn(reporter, token, head_start)
            else:
                self._delete(reporter)
        except Superseded:
            logger.info("operation %s for %s superseded", operation.id, operation.username)
        # The operation's last events were just published: the streams following it
        # deliver them before this worker's housekeeping (the next-operation check, the
        # lease's release). Redis answers those faster than the event loop looks at the
        # subscription, so they went first: a spawn's ``complete`` reached its client about
        # 1 ms after the final script, against 0.45 ms now.
        yield_to_io()

    def _spawn(self, reporter: Reporter, token: str | None, head_start: HeadStart | None) -> None:
        operation = reporter.operation
        labs = self._ctx.labs
        try:
            if token is None:
                raise SpawnFailed("the spawn's token expired before it could be used")
            spawned = run_spawn(self._ctx, reporter, token, head_start)
        except (SpawnFailed, DeadlineExceeded, KubernetesError) as exc:
            message = _failure_message(exc, "spawn", self._ctx.config.lab.spawn_timeout)
            self._fail(reporter, message)
            return
        announce = self._ctx.events.announcement(
            operation.username,
            [*spawned.events, (EventType.INFO, "The lab is running"), *_COMPLETE],
        )
        if labs.finish(operation, spawned.record, announce):
            logger.info("lab for %s is running", operation.username)

    def _delete(self, reporter: Reporter) -> None:
        operation = reporter.operation
        try:
            run_delete(self._ctx, reporter)
        except (DeadlineExceeded, KubernetesError) as exc:
            message = _failure_message(exc, "delete", self._ctx.config.lab.delete_timeout)
            self._fail(reporter, message)
            return
        announce = self._ctx.events.announcement(operation.username, _COMPLETE)
        if self._ctx.labs.finish(operation, None, announce):
            logger.info("lab for %s deleted", operation.username)

    def _fail(self, reporter: Reporter, message: str) -> None:
        operation = reporter.operation
        logger.warning("%s for %s failed: %s", operation.kind.value, operation.username, message)
        record = failed_record(self._ctx, reporter, message)
        if record is not None:
            record.status = LabStatus.FAILED
        announce = self._ctx.events.announcement(
            operation.username, [(EventType.ERROR, message), (EventType.FAILED, message)]
        )
        self._ctx.labs.finish(operation, record, announce)


_COMPLETE = [(EventType.PROGRESS, "100"), (EventType.COMPLETE, "")]
"""The events that end a successful operation, appended with its final record."""


def _failure_message(exc: Exception, what: str, timeout: float) -> str:
    if isinstance(exc, DeadlineExceeded):
        return f"the {what} did not finish within {timeout:g} seconds"
    if isinstance(exc, KubernetesError):
        return f"Kubernetes error during the {what}: {exc.message}"
    return str(exc)

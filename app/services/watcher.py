"""The elected lab watcher: keeps Redis in step with what happens to lab pods.

Exactly one worker across all processes and replicas leads (a ``RedisLease``). The leader
runs one cluster-wide watch of lab pods and a periodic reconcile beside it:

- The watch applies each change outside an operation as it happens: a lab whose pod is
  deleted, or stops for good, becomes ``failed``. A 410 Gone (the watch fell too far behind)
  is answered by listing again and reconciling at once, since changes may have been missed
  in between; each watch request ends after ``watchSeconds`` and is reopened from the last
  resourceVersion seen, so a silently dead connection cannot go unnoticed for long.
- The reconcile (see ``recovery``) runs when the tenure starts and every
  ``reconcileSeconds``, rebuilding lost records and repairing whatever the watch missed.

Changes are never applied to a lab while an operation runs for its user: the operation
owns the lab until it finishes, and its outcome is what the user asked for.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import redis

from app.services.context import LabContext
from app.services.leadership import ElectedWorker, Tenure
from app.services.operations import worker_identity
from app.services.recovery import LAB_POD_SELECTOR, Reconciler, assess, lab_user
from app.storage.kubernetes import KubernetesError, WatchExpired
from app.storage.leader import RedisLease

logger = logging.getLogger(__name__)

LEASE_NAME = "lab-watcher"
_MAX_BACKOFF_SECONDS = 30.0


@dataclass
class _Cursor:
    """Where the watch resumes: None means list again first."""

    version: str | None = None


class LabWatcher:
    """This process's candidate for the watcher role; ``start`` it once, ``stop`` at exit."""

    def __init__(self, ctx: LabContext, client: redis.Redis, *, owner: str | None = None) -> None:
        self._ctx = ctx
        self._config = ctx.config.watcher
        lease = RedisLease(
            client,
            f"{ctx.config.redis.key_prefix}leader:{LEASE_NAME}",
            owner or worker_identity(),
            self._config.lease_seconds,
        )
        self.lease_key = lease.key
        self._election = ElectedWorker(lease, self._lead, name=LEASE_NAME)
        self._count_lock = threading.Lock()
        self._reconciles = 0

    @property
    def owner(self) -> str:
        return self._election.owner

    @property
    def is_leader(self) -> bool:
        return self._election.is_leader

    @property
    def reconciles(self) -> int:
        """Reconciles completed by this process, under any tenure (tests await it)."""
        with self._count_lock:
            return self._reconciles

    def start(self) -> None:
        self._election.start()

    def stop(self) -> None:
        self._election.stop()

    # Leading -------------------------------------------------------------------------

    def _lead(self, tenure: Tenure) -> None:
        wake = threading.Event()
        tenure.on_end(wake.set)
        reconciling: threading.Thread | None = None
        cursor = _Cursor()
        failures = 0
        try:
            while not tenure.ended:
                try:
                    if cursor.version is None:
                        _, cursor.version = self._ctx.kube.list_lab_pods(LAB_POD_SELECTOR)
                        if reconciling is None:
                            # Started after the first list, so its first run sees
                            # everything the watch will not report.
                            reconciling = threading.Thread(
                                target=self._reconcile_loop,
                                args=(tenure, wake),
                                name=f"{LEASE_NAME}-reconcile",
                                daemon=True,
                            )
                            reconciling.start()
                        else:
                            wake.set()
                    started = time.monotonic()
                    if self._watch(tenure, cursor) or time.monotonic() - started >= 1:
                        failures = 0
                    else:
                        # Closed at once with nothing to say (a proxy or an API server
                        # shedding load): pause rather than reconnect in a tight loop.
                        tenure.wait(1)
                except WatchExpired:
                    logger.info("lab pod watch expired; listing again")
                    cursor.version = None
                except (KubernetesError, redis.RedisError) as exc:
                    failures += 1
                    delay = min(_MAX_BACKOFF_SECONDS, 0.5 * 2**failures)
                    logger.warning("lab pod watch failed (%s); retrying in %gs", exc, delay)
                    tenure.wait(delay)
        finally:
            tenure.end()
            if reconciling is not None:
                reconciling.join()

    def _watch(self, tenure: Tenure, cursor: _Cursor) -> int:
        """Follow one watch request from ``cursor``, advancing it past applied events.

        An event whose handling failed (Redis or the API unreachable) leaves the cursor
        before it, so the next request delivers it again. Returns how many events came.
        """
        assert cursor.version is not None
        stream = self._ctx.kube.open_lab_pod_watch(
            LAB_POD_SELECTOR, cursor.version, self._config.watch_seconds
        )
        undo = tenure.on_end(stream.cancel)
        count = 0
        try:
            for kind, pod in stream:
                count += 1
                if tenure.ended:
                    break
                if kind != "BOOKMARK":
                    self._apply_safely(kind, pod)
                version = (pod.get("metadata") or {}).get("resourceVersion")
                if version:
                    cursor.version = str(version)
        finally:
            undo()
        return count

    def _apply_safely(self, kind: str, pod: dict[str, Any]) -> None:
        try:
            self._apply(kind, pod)
        except (KubernetesError, redis.RedisError):
            raise
        except Exception:
            # A pod this code cannot make sense of must not stop the watch for every
            # other lab; the reconcile looks at it again later.
            meta = pod.get("metadata") or {}
            logger.exception(
                "cannot apply a change of pod %s/%s", meta.get("namespace"), meta.get("name")
            )

    def _apply(self, kind: str, pod: dict[str, Any]) -> None:
        username = lab_user(pod, self._ctx.config.namespace_prefix)
        if username is None:
            return
        labs = self._ctx.labs
        record, busy = labs.get_unless_busy(username)
        if record is None or busy:
            return  # Nothing to keep in step (the reconcile rebuilds), or an operation owns it.
        if assess(record, None if kind == "DELETED" else pod) is None:
            return
        # The event may predate an operation that has finished since (a spawn replacing a
        # failed lab deletes the old pod): judge the pod as Kubernetes has it now.
        meta = pod["metadata"]
        update = assess(record, self._ctx.kube.read_pod(meta["namespace"], meta["name"]))
        if update is not None and labs.put_if_idle(update, record):
            logger.warning(
                "lab of %s is now %s (pod %s): %s",
                username,
                update.status,
                update.pod,
                update.error or "in step with Kubernetes",
            )

    def _reconcile_loop(self, tenure: Tenure, wake: threading.Event) -> None:
        reconciler = Reconciler(self._ctx)
        while not tenure.ended:
            wake.clear()
            try:
                reconciler.run()
                with self._count_lock:
                    self._reconciles += 1
            except (KubernetesError, redis.RedisError) as exc:
                logger.warning("reconcile skipped: %s", exc)
            except Exception:
                logger.exception("reconcile failed")
            wake.wait(self._config.reconcile_seconds)

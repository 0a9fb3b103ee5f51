"""The elected watcher: keeps Redis in step with what happens to workloads' pods.

Exactly one worker across all processes and replicas leads (a ``LeadershipLease``). The leader
runs a cluster-wide watch of each tracked kind's pods and a periodic reconcile beside them:

- A watch applies each change outside an operation as it happens (for labs: a lab whose
  pod is deleted, or stops for good, becomes ``failed``). A 410 Gone (the watch fell too
  far behind) is answered by listing again and reconciling at once, since changes may have
  been missed in between; each watch request ends after ``watchSeconds`` and is reopened
  from the last resourceVersion seen, so a silently dead connection cannot go unnoticed
  for long.
- The reconcile (``reconcile.Reconciler``) runs when the tenure starts and every
  ``reconcileSeconds``, rebuilding lost records and repairing whatever the watch missed.

Changes are never applied to a workload while an operation runs for it: the operation owns
it until it finishes, and its outcome is what was asked for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from app.engine.kind import WorkloadKind
from app.engine.leadership import ElectedLoop, Tenure
from app.engine.reconcile import Reconciler, log_repair, tracked
from app.engine.tracking import Ending, WorkloadTracking
from app.models.config import WatcherConfig
from app.models.workload import WorkloadRef
from app.storage.kubernetes import KubernetesError, KubernetesStorage, WatchExpired
from app.storage.leader import LeadershipLost
from app.storage.reconcile_requests import ReconcileRequests, ReconcileResult
from app.storage.workloads import WorkloadStore

logger = logging.getLogger(__name__)

COMPLETENESS_CHECK_SECONDS = 1.0
"""How often the leader looks, between reconciles, whether Redis lost its completeness
marker (came back empty) and must be rebuilt at once."""

LEASE_NAME = "lab-watcher"
"""The role's lease (its name predates other kinds of workload; replicas agree on it)."""
_MAX_BACKOFF_SECONDS = 30.0


@dataclass
class _Cursor:
    """Where a watch resumes: None means list again first."""

    version: str | None = None


class WorkloadWatcher(ElectedLoop):
    """This process's candidate for the watcher role; ``start`` it once, ``stop`` at exit."""

    def __init__(
        self,
        *,
        store: WorkloadStore,
        kube: KubernetesStorage,
        kinds: Iterable[WorkloadKind],
        config: WatcherConfig,
        client: redis.Redis,
        key_prefix: str,
        owner: str | None = None,
        housekeeping: Sequence[Callable[[], object]] = (),
        end: Ending | None = None,
    ) -> None:
        """``housekeeping``: what the leader does after each reconcile, once across every
        replica (dropping labs that failed long ago); a failure is logged, never fatal.
        ``end``: how a workload that ended by itself is deleted (``Engine.end``); without
        it, such workloads stay until someone deletes them."""
        self._store = store
        self._end = end
        self._housekeeping = tuple(housekeeping)
        self._kube = kube
        self._kinds = list(kinds)
        self._config = config
        super().__init__(
            client,
            key_prefix=key_prefix,
            loop=LEASE_NAME,
            ttl_seconds=config.lease_seconds,
            owner=owner,
        )
        self.requests = ReconcileRequests(client, key_prefix)
        """Administrators' requests for a reconcile now, which the leader answers."""
        self._count_lock = threading.Lock()
        self._reconciles = 0

    @property
    def reconciles(self) -> int:
        """Reconciles completed by this process, under any tenure (tests await it)."""
        with self._count_lock:
            return self._reconciles

    # Leading -------------------------------------------------------------------------

    def _lead(self, tenure: Tenure) -> None:
        """Watch each tracked kind's pods, and reconcile once every watch has listed."""
        wake = threading.Event()
        tenure.on_end(wake.set)
        watches = []
        listed = []
        for kind, tracking in tracked(self._kinds):
            first_list = threading.Event()
            listed.append(first_list)
            watches.append(
                threading.Thread(
                    target=self._watch_kind,
                    args=(tenure, kind, tracking, first_list, wake),
                    name=f"{LEASE_NAME}-{kind}",
                    daemon=True,
                )
            )
        for watch in watches:
            watch.start()
        try:
            # The reconcile starts after the first lists, so its first run sees everything
            # the watches will not report.
            for first_list in listed:
                tenure.on_end(first_list.set)
            for first_list in listed:
                first_list.wait()
            self._reconcile_loop(tenure, wake)
        finally:
            tenure.end()
            for watch in watches:
                watch.join()

    def _watch_kind(
        self,
        tenure: Tenure,
        kind: str,
        tracking: WorkloadTracking,
        first_list: threading.Event,
        wake: threading.Event,
    ) -> None:
        cursor = _Cursor()
        failures = 0
        try:
            while not tenure.ended:
                try:
                    if cursor.version is None:
                        _, cursor.version = self._kube.list_tracked(
                            tracking.watched_resource,
                            tracking.selector,
                            namespace=tracking.namespace,
                        )
                        if first_list.is_set():
                            wake.set()  # Changes may have been missed: reconcile now.
                        first_list.set()
                    started = time.monotonic()
                    if (
                        self._watch(tenure, kind, tracking, cursor)
                        or time.monotonic() - started >= 1
                    ):
                        failures = 0
                    else:
                        # Closed at once with nothing to say (a proxy or an API server
                        # shedding load): pause rather than reconnect in a tight loop.
                        tenure.wait(1)
                except WatchExpired:
                    logger.info("%s watch expired; listing again", kind)
                    cursor.version = None
                except (KubernetesError, redis.RedisError) as exc:
                    failures += 1
                    delay = min(_MAX_BACKOFF_SECONDS, 0.5 * 2**failures)
                    logger.warning("%s watch failed (%s); retrying in %gs", kind, exc, delay)
                    tenure.wait(delay)
        except LeadershipLost:
            logger.warning("%s watch stopped: another worker leads", kind)
        except Exception:
            logger.exception("%s watch stopped; giving the role up", kind)
        finally:
            # Whatever ends one watch ends the tenure: a successor starts afresh.
            tenure.end()

    def _watch(self, tenure: Tenure, kind: str, tracking: WorkloadTracking, cursor: _Cursor) -> int:
        """Follow one watch request from ``cursor``, advancing it past applied events.

        An event whose handling failed (Redis or the API unreachable) leaves the cursor
        before it, so the next request delivers it again. Returns how many events came.
        """
        assert cursor.version is not None
        stream = self._kube.open_tracked_watch(
            tracking.watched_resource,
            tracking.selector,
            cursor.version,
            self._config.watch_seconds,
            namespace=tracking.namespace,
        )
        undo = tenure.on_end(stream.cancel)
        count = 0
        try:
            for change, pod in stream:
                count += 1
                if tenure.ended:
                    break
                try:
                    if change != "BOOKMARK":
                        self._apply(tenure, kind, tracking, change, pod)
                except (KubernetesError, redis.RedisError, LeadershipLost):
                    raise
                except Exception:
                    # A pod this code cannot make sense of must not stop the watch for
                    # every other workload; the reconcile looks at it again later.
                    meta = pod.get("metadata") or {}
                    logger.exception(
                        "cannot apply a change of pod %s/%s",
                        meta.get("namespace"),
                        meta.get("name"),
                    )
                version = (pod.get("metadata") or {}).get("resourceVersion")
                if version:
                    cursor.version = str(version)
        finally:
            undo()
        return count

    def _apply(
        self,
        tenure: Tenure,
        kind: str,
        tracking: WorkloadTracking,
        change: str,
        pod: dict[str, Any],
    ) -> None:
        name = tracking.owner(pod)
        if name is None:
            return
        ref = WorkloadRef(kind, name)
        found = self._store.record_and_busy(ref)
        if found.record is None or found.busy:
            return  # Nothing to keep in step (the reconcile rebuilds), or an operation owns it.
        reason = tracking.ended(found.record, None if change == "DELETED" else pod)
        if reason is not None:
            if self._end is not None:
                self._end(ref, reason=reason)
            return
        if tracking.assess(found.record, None if change == "DELETED" else pod) is None:
            return
        # The event may predate an operation that has finished since (a spawn replacing a
        # failed lab deletes the old pod): judge the pod as Kubernetes has it now.
        meta = pod["metadata"]
        now = self._kube.read_tracked(tracking.watched_resource, meta["namespace"], meta["name"])
        update = tracking.assess(found.record, now)
        if update is not None and self._store.put_if_idle(
            ref=ref, record=update, expect=found.record, fence=tenure.fence
        ):
            log_repair(ref, update, by=logger)

    def _reconcile_loop(self, tenure: Tenure, wake: threading.Event) -> None:
        reconciler = Reconciler(
            self._store, self._kube, self._kinds, fence=tenure.fence, end=self._end
        )
        while not tenure.ended:
            wake.clear()
            try:
                asked = self.requests.take()
                complete = reconciler.run()
                self.requests.answer(asked, ReconcileResult(time.time(), complete))
                with self._count_lock:
                    self._reconciles += 1
                self._keep_house(tenure)
            except LeadershipLost:
                logger.warning("reconcile stopped: another worker leads")
                tenure.end()
                return
            except (KubernetesError, redis.RedisError) as exc:
                logger.warning("reconcile skipped: %s", exc)
            except Exception:
                logger.exception("reconcile failed")
            self._await_next_reconcile(tenure, wake)

    def _keep_house(self, tenure: Tenure) -> None:
        for chore in self._housekeeping:
            if tenure.ended:
                return
            try:
                chore()
            except (KubernetesError, redis.RedisError) as exc:
                logger.warning("housekeeping skipped: %s", exc)
            except Exception:
                logger.exception("housekeeping failed")

    def _await_next_reconcile(self, tenure: Tenure, wake: threading.Event) -> None:
        """Until the next reconcile is due, or sooner: woken (a watch listed again), Redis
        no longer complete (it came back empty, and readers are told to wait), or an
        administrator asked for one (``POST /spawner/v1/admin/reconcile``)."""
        deadline = time.monotonic() + self._config.reconcile_seconds
        while not tenure.ended:
            left = deadline - time.monotonic()
            if left <= 0 or wake.wait(min(left, COMPLETENESS_CHECK_SECONDS)):
                return
            try:
                if not self._store.is_complete() or self.requests.waiting():
                    return
            except redis.RedisError:
                return  # The reconcile reports it; the wait above paces the retries.

"""The elected prepuller: lab images cached on every eligible node before users ask for them.

Exactly one worker across all processes and replicas leads (a ``RedisLease``). Every
``prepuller.intervalSeconds`` its pass:

1. takes the prepull set of every configuration from the image lists in Redis;
2. lists the nodes (one call) and reads each one's cached images (``status.images``, matched
   by digest as well as by name) and whether lab pods may run there: the lab's node selector
   and tolerations against its labels and taints; cordoned and not-ready nodes are not;
3. lists its own pull pods (one call) and settles them: a pod that finished is deleted (the
   node now has the image); one whose pull failed or took longer than ``pullTimeout`` is
   deleted and the failure recorded with its reason, to be retried after a back-off that
   doubles per failure; one that is no longer needed (image dropped, node ineligible or
   gone) is deleted;
4. starts a pull pod for each (image, node) still missing, at most ``pullsPerNode`` per node
   and ``maxPulls`` in all, skipping pulls in back-off, so one bad image or node holds no
   more than its own slot;
5. stores the status report DMTN-222 describes, which the status route and the spawn form
   read.

A pass costs two list calls plus one call per pull started or pod removed, whatever the
cluster's size. Pull pods have names fixed by (image, node), so a new leader adopts the pulls
its predecessor started (and cleans them up when they end) and two leaders can never start
the same pull twice.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis

from app.builders.prepull import (
    IMAGE_ANNOTATION,
    NODE_ANNOTATION,
    PREPULL_SELECTOR,
    build_pull_pod,
)
from app.config import Config
from app.images.placement import NodeImages, Placement, place, pull_reference, read_node
from app.models.images import KnownImage
from app.services.images import ImageService
from app.services.leadership import ElectedWorker, Tenure
from app.services.operations import worker_identity
from app.storage.kubernetes import KubernetesError, KubernetesStorage
from app.storage.leader import RedisLease
from app.storage.prepull import PrepullStore, PullFailure, failure_key

logger = logging.getLogger(__name__)

LEASE_NAME = "prepuller"
_PULL_ERRORS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)


@dataclass
class PassReport:
    """What one pass saw and did (for logs, tests and the benchmark)."""

    nodes: int = 0
    eligible: int = 0
    images: int = 0
    missing: int = 0
    started: list[tuple[str, str]] = field(default_factory=list)
    finished: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str, str]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    in_flight: int = 0


class Prepuller:
    """This process's candidate for the prepuller role; ``start`` once, ``stop`` at exit."""

    def __init__(
        self,
        config: Config,
        images: ImageService,
        kube: KubernetesStorage,
        store: PrepullStore,
        client: redis.Redis,
        *,
        owner: str | None = None,
    ) -> None:
        self._config = config
        self._settings = config.prepuller
        self._images = images
        self._kube = kube
        self._store = store
        self._namespace = config.kubernetes.service_namespace
        lease = RedisLease(
            client,
            f"{config.redis.key_prefix}leader:{LEASE_NAME}",
            owner or worker_identity(),
            self._settings.lease_seconds,
        )
        self._election = ElectedWorker(lease, self._lead, name=LEASE_NAME)

    @property
    def is_leader(self) -> bool:
        return self._election.is_leader

    def start(self) -> None:
        if self._settings.enabled:
            self._election.start()

    def stop(self) -> None:
        self._election.stop()

    def _lead(self, tenure: Tenure) -> None:
        while not tenure.ended:
            try:
                self.run_pass()
            except (KubernetesError, redis.RedisError) as exc:
                logger.warning("prepuller pass failed: %s", exc)
            except Exception:
                logger.exception("prepuller pass failed")
            tenure.wait(self._settings.interval_seconds)

    # One pass ------------------------------------------------------------------------

    def run_pass(self, now: float | None = None) -> PassReport:
        now = time.time() if now is None else now
        report = PassReport()
        sets = self._images.image_sets()
        wanted = _wanted_images(sets)
        lab = self._config.lab
        nodes = [read_node(n, lab.node_selector, lab.tolerations) for n in self._kube.list_nodes()]
        placements = place(wanted, nodes)
        failures = self._store.failures()
        pods = self._kube.list_pods(self._namespace, PREPULL_SELECTOR)

        needed = {(pull_reference(p.image), node) for p in placements for node in p.missing}
        in_flight = self._settle(pods, needed, failures, now, report)
        self._start_pulls(placements, in_flight, failures, now, report)

        # A failure whose pull is no longer needed (now cached, or dropped) is forgotten.
        stale = [key for key, f in failures.items() if (f.image, f.node) not in needed]
        self._store.clear_failures(stale)
        for key in stale:
            failures.pop(key, None)

        report.nodes = len(nodes)
        report.eligible = sum(1 for n in nodes if n.eligible)
        report.images = len(wanted)
        report.missing = len(needed)
        report.in_flight = len(in_flight)
        status, everywhere = _status(sets, placements, nodes, failures, in_flight, now)
        self._store.save_status(status, everywhere)
        if report.started or report.finished or report.failed:
            logger.info(
                "prepuller: %d pulls started, %d finished, %d failed; %d running, %d missing",
                len(report.started),
                len(report.finished),
                len(report.failed),
                report.in_flight,
                report.missing,
            )
        return report

    def _settle(
        self,
        pods: list[dict[str, Any]],
        needed: set[tuple[str, str]],
        failures: dict[str, PullFailure],
        now: float,
        report: PassReport,
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """Deal with the pull pods that exist; returns those still pulling, by (image, node)."""
        in_flight: dict[tuple[str, str], dict[str, Any]] = {}
        for pod in pods:
            meta = pod.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            key = (str(annotations.get(IMAGE_ANNOTATION)), str(annotations.get(NODE_ANNOTATION)))
            name = str(meta.get("name"))
            if meta.get("deletionTimestamp"):
                in_flight[key] = pod  # still occupies its node's slot until it is gone
                continue
            outcome = _outcome(pod, now, self._settings.pull_timeout)
            if outcome == "pulling" and key in needed:
                in_flight[key] = pod
                continue
            self._remove(name)
            report.removed.append(name)
            if outcome == "done":
                report.finished.append(key)
                failures.pop(failure_key(*key), None)
                self._store.clear_failures([failure_key(*key)])
            elif outcome != "pulling":
                previous = failures.get(failure_key(*key))
                attempts = (previous.attempts if previous else 0) + 1
                delay = min(
                    self._settings.retry_seconds * 2 ** (attempts - 1),
                    self._settings.max_retry_seconds,
                )
                failure = PullFailure(key[0], key[1], outcome, attempts, now + delay)
                failures[failure_key(*key)] = failure
                self._store.record_failure(failure)
                report.failed.append((key[0], key[1], outcome))
                logger.warning("prepull of %s on %s failed: %s", key[0], key[1], outcome)
        return in_flight

    def _start_pulls(
        self,
        placements: list[Placement],
        in_flight: dict[tuple[str, str], dict[str, Any]],
        failures: dict[str, PullFailure],
        now: float,
        report: PassReport,
    ) -> None:
        per_node = Counter(node for _, node in in_flight)
        limit_node, limit_all = self._settings.pulls_per_node, self._settings.max_pulls
        for placement in placements:
            image = pull_reference(placement.image)
            for node in placement.missing:
                key = (image, node)
                if key in in_flight:
                    continue
                failure = failures.get(failure_key(image, node))
                if failure is not None and failure.retry_at > now:
                    continue
                if per_node[node] >= limit_node or len(in_flight) >= limit_all:
                    continue
                body = build_pull_pod(image, node, self._config)
                try:
                    self._kube.create_pod(body)
                except KubernetesError as exc:
                    if exc.status != 409:  # 409: already pulling (another leader's pod)
                        logger.warning("cannot start prepull of %s on %s: %s", image, node, exc)
                        continue
                in_flight[key] = body
                per_node[node] += 1
                report.started.append(key)

    def _remove(self, name: str) -> None:
        try:
            self._kube.delete_pod(self._namespace, name)
        except KubernetesError as exc:
            logger.warning("cannot remove prepull pod %s: %s", name, exc)


def _wanted_images(sets: list[tuple[Any, Any]]) -> list[KnownImage]:
    """Every configuration's prepull images, each pull reference once, in order."""
    wanted: list[KnownImage] = []
    seen: set[str] = set()
    for _, image_set in sets:
        for image in image_set.prepulled_images():
            reference = pull_reference(image)
            if reference not in seen:
                seen.add(reference)
                wanted.append(image)
    return wanted


def _outcome(pod: dict[str, Any], now: float, timeout: float) -> str:
    """``pulling``, ``done``, or why the pull failed."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    containers = status.get("containerStatuses") or []
    if phase == "Succeeded" or any(
        (c.get("state") or {}).get("terminated") is not None for c in containers
    ):
        # Whatever the command did, a container that ran means the image was pulled.
        return "done"
    for container in containers:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in _PULL_ERRORS:
            return f"{waiting['reason']}: {waiting.get('message') or 'image pull failed'}"
    if phase == "Failed":
        return status.get("message") or status.get("reason") or "the pull pod failed"
    created = _timestamp((pod.get("metadata") or {}).get("creationTimestamp"))
    if created is not None and now - created > timeout:
        return f"the pull took longer than {timeout:g} seconds"
    return "pulling"


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _status(
    sets: list[tuple[Any, Any]],
    placements: list[Placement],
    nodes: list[NodeImages],
    failures: dict[str, PullFailure],
    in_flight: dict[tuple[str, str], dict[str, Any]],
    now: float,
) -> tuple[dict[str, Any], list[str]]:
    """DMTN-222's prepull status (``configs`` and ``nodes``, with the pulls running and
    failed for each pending image), and the references prepulled to every eligible node
    (what the spawn form offers)."""
    by_reference = {pull_reference(p.image): p for p in placements}
    configs = []
    everywhere: list[str] = []
    for block, image_set in sets:
        prepulled: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []
        other: list[dict[str, Any]] = []
        chosen = set()
        for image in image_set.prepulled_images():
            placement = by_reference[pull_reference(image)]
            chosen.add(image.reference)
            entry: dict[str, Any] = {
                "url": image.reference,
                "name": image.name,
                "hash": image.digest,
                "nodes": list(placement.nodes),
            }
            if placement.missing:
                entry["missing"] = list(placement.missing)
                entry["pulling"] = sorted(
                    n for n in placement.missing if (pull_reference(image), n) in in_flight
                )
                entry["failures"] = [
                    {
                        "node": f.node,
                        "reason": f.reason,
                        "attempts": f.attempts,
                        "retry": _iso(f.retry_at),
                    }
                    for n in placement.missing
                    if (f := failures.get(failure_key(pull_reference(image), n))) is not None
                ]
                pending.append(entry)
            else:
                prepulled.append(entry)
                everywhere.append(image.reference)
        for image in image_set.images:
            if image.reference not in chosen:
                other.append({"url": image.reference, "name": image.name})
        configs.append(
            {
                **block.document,
                "images": {"prepulled": prepulled, "pending": pending, "other": other},
            }
        )
    node_reports = []
    for node in nodes:
        report: dict[str, Any] = {"name": node.name, "eligible": node.eligible}
        if not node.eligible:
            report["comment"] = node.comment
        report["cached"] = list(node.cached)
        node_reports.append(report)
    return {"updated": _iso(now), "configs": configs, "nodes": node_reports}, everywhere


def prepull_report(images: ImageService, store: PrepullStore) -> dict[str, Any]:
    """The status route's body: the latest pass's report, or before any pass, every
    configuration with its prepull images pending and no nodes known."""
    status = store.status()
    if status is not None:
        return status
    configs = []
    for block, image_set in images.image_sets():
        chosen = {i.reference for i in image_set.prepulled_images()}
        pending: list[dict[str, Any]] = [
            {"url": i.reference, "name": i.name, "hash": i.digest, "nodes": [], "missing": []}
            for i in image_set.prepulled_images()
        ]
        other = [
            {"url": i.reference, "name": i.name}
            for i in image_set.images
            if i.reference not in chosen
        ]
        configs.append(
            {**block.document, "images": {"prepulled": [], "pending": pending, "other": other}}
        )
    return {"updated": None, "configs": configs, "nodes": []}


def _iso(timestamp: float) -> str:
    return (
        datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )

"""The elected prepuller: lab images cached on every eligible node before users ask for them.

Exactly one worker across all processes and replicas leads (a ``LeadershipLease``). Every
``prepuller.intervalSeconds`` its pass:

1. takes the prepull set of every configuration from the image lists in Redis;
2. lists the nodes (one call) and reads each one's cached images (``status.images``, matched
   by digest as well as by name) and whether lab pods may run there: the lab's node selector
   and tolerations against its labels and taints; cordoned and not-ready nodes are not;
3. lists its own pull pods (one call) and settles them: a pod whose images are all pulled is
   deleted; one whose pull failed, or that took longer than ``pullTimeout`` per image, is
   deleted and the failure recorded against that image and node with its reason, to be
   retried after a back-off that doubles per failure (the batch's other images go into the
   next pod at once); one no longer needed (images dropped, node ineligible or gone) is
   deleted;
4. starts pull pods for what is still missing: at most ``pullsPerNode`` per node and
   ``maxPulls`` in all, a node's missing images shared among its free slots (each pod pulls
   its batch one image after another), skipping pulls in back-off, so one bad image or node
   holds no more than its own slot;
5. stores the status report DMTN-222 describes, which the status route and the spawn form
   read.

A pass costs two list calls plus one call per pull pod started or removed, whatever the
cluster's size, and makes those calls a few at a time. Pull pods have names fixed by their
node and images, so a new leader adopts the pulls its predecessor started (and cleans them up
when they end) and two leaders can never start the same pull twice.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis

from app.engine.leadership import ElectedLoop, Tenure
from app.models.config import Config
from app.models.images import KnownImage
from app.storage.admin_feed import AdminFeed
from app.storage.kubernetes import KubernetesError, KubernetesStorage
from app.storage.prepull import PrepullStore, PullFailure, failure_key
from app.timestamps import iso_utc, parse_iso
from app.workloads.image.builders import (
    NODE_ANNOTATION,
    PREPULL_SELECTOR,
    build_pull_pod,
    pod_images,
    pull_container_name,
)
from app.workloads.image.placement import NodeImages, Placement, place, pull_reference, read_node
from app.workloads.image.service import ImageService

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


class Prepuller(ElectedLoop):
    """This process's candidate for the prepuller role; ``start`` once, ``stop`` at exit."""

    def __init__(
        self,
        config: Config,
        images: ImageService,
        kube: KubernetesStorage,
        store: PrepullStore,
        client: redis.Redis,
        *,
        feed: AdminFeed | None = None,
        owner: str | None = None,
    ) -> None:
        self._config = config
        self._feed = feed
        self._settings = config.prepuller
        self._images = images
        self._kube = kube
        self._store = store
        self._namespace = config.kubernetes.service_namespace
        super().__init__(
            client,
            key_prefix=config.redis.key_prefix,
            loop=LEASE_NAME,
            ttl_seconds=self._settings.lease_seconds,
            owner=owner,
        )

    def start(self) -> None:
        if self._settings.enabled:
            super().start()

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
        in_flight, per_node, arrived = self._settle(pods, needed, failures, now, report)
        # The nodes were listed before the pods: an image a pull pod reports done is there,
        # even if its node does not say so yet (pulling it again would count it twice).
        needed -= arrived
        self._start_pulls(placements, needed, in_flight, per_node, failures, now, report)

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
        progress = {
            "images": report.images,
            "nodes": report.eligible,
            "missing": report.missing,
            "running": report.in_flight,
        }
        self._store.save_status(status, everywhere, progress)
        if report.started or report.finished or report.failed:
            self._announce(report)
            logger.info(
                "prepuller: %d pulls started, %d finished, %d failed; %d running, %d missing",
                len(report.started),
                len(report.finished),
                len(report.failed),
                report.in_flight,
                report.missing,
            )
        return report

    def _announce(self, report: PassReport) -> None:
        """Tell the administrators' live feed what this pass changed."""
        if self._feed is None:
            return
        self._feed.publish(
            "prepull",
            {
                "started": len(report.started),
                "finished": len(report.finished),
                "failed": len(report.failed),
                "running": report.in_flight,
                "missing": report.missing,
                "images": report.images,
                "nodes": report.eligible,
            },
        )

    def _settle(
        self,
        pods: list[dict[str, Any]],
        needed: set[tuple[str, str]],
        failures: dict[str, PullFailure],
        now: float,
        report: PassReport,
    ) -> tuple[dict[tuple[str, str], str], Counter[str], set[tuple[str, str]]]:
        """Deal with the pull pods that exist. Returns the (image, node) pulls still under
        way (to the pod's name), how many pull pods each node runs, and the (image, node)
        pulls the pods report done."""
        in_flight: dict[tuple[str, str], str] = {}
        per_node: Counter[str] = Counter()
        arrived: set[tuple[str, str]] = set()
        doomed: list[str] = []
        for pod in pods:
            meta = pod.get("metadata") or {}
            name = str(meta.get("name"))
            node = str((meta.get("annotations") or {}).get(NODE_ANNOTATION))
            images = pod_images(pod)
            progress = _progress(pod, images)
            if meta.get("deletionTimestamp"):
                per_node[node] += 1  # occupies its node's slot until it is gone
                continue
            done = [image for image, state in progress if state == _DONE]
            arrived.update((image, node) for image in done)
            problem = next(((i, s) for i, s in progress if s not in (_DONE, _PULLING)), None)
            if (
                problem is None
                and len(done) < len(images)
                and _timed_out(pod, now, self._settings.pull_timeout * len(images))
            ):
                first = next(image for image, state in progress if state != _DONE)
                limit = self._settings.pull_timeout
                problem = (first, f"the pull took longer than {limit:g} seconds per image")
            waiting = [
                image for image, state in progress if state == _PULLING and (image, node) in needed
            ]
            recovered = [failure_key(i, node) for i in done if failure_key(i, node) in failures]
            if recovered:  # an image that failed before is there now: forget the failure
                self._store.clear_failures(recovered)
                for key in recovered:
                    failures.pop(key, None)
            if problem is None and waiting:
                per_node[node] += 1
                for image in waiting:
                    in_flight[(image, node)] = name
                continue
            doomed.append(name)
            report.removed.append(name)
            report.finished.extend((image, node) for image in done)
            if problem is not None:
                image, reason = problem
                previous = failures.get(failure_key(image, node))
                attempts = (previous.attempts if previous else 0) + 1
                delay = min(
                    self._settings.retry_seconds * 2 ** (attempts - 1),
                    self._settings.max_retry_seconds,
                )
                failure = PullFailure(image, node, reason, attempts, now + delay)
                failures[failure_key(image, node)] = failure
                self._store.record_failure(failure)
                report.failed.append((image, node, reason))
                logger.warning("prepull of %s on %s failed: %s", image, node, reason)
        _at_once(self._remove, doomed)
        return in_flight, per_node, arrived

    def _start_pulls(
        self,
        placements: list[Placement],
        needed: set[tuple[str, str]],
        in_flight: dict[tuple[str, str], str],
        per_node: Counter[str],
        failures: dict[str, PullFailure],
        now: float,
        report: PassReport,
    ) -> None:
        """Start pull pods for what is ``needed``, within the bounds. A node's free slots share
        its missing images, so with one slot a node gets one pod pulling them all in turn."""
        wanted: dict[str, list[str]] = {}
        for placement in placements:
            image = pull_reference(placement.image)
            for node in placement.missing:
                if (image, node) in in_flight or (image, node) not in needed:
                    continue
                failure = failures.get(failure_key(image, node))
                if failure is not None and failure.retry_at > now:
                    continue
                wanted.setdefault(node, []).append(image)
        total = sum(per_node.values())
        bodies: list[tuple[list[str], str, dict[str, Any]]] = []
        for node in sorted(wanted):
            images = wanted[node]
            slots = min(
                self._settings.pulls_per_node - per_node[node], self._settings.max_pulls - total
            )
            if slots <= 0:
                continue
            size = -(-len(images) // slots)
            for batch in (images[i : i + size] for i in range(0, len(images), size)):
                bodies.append((batch, node, build_pull_pod(batch, node, self._config)))
                per_node[node] += 1
                total += 1

        def create(item: tuple[list[str], str, dict[str, Any]]) -> bool:
            _, node, body = item
            try:
                self._kube.create_pod(body)
            except KubernetesError as exc:
                if exc.status != 409:  # 409: already pulling (another leader's pod)
                    logger.warning("cannot start prepull on %s: %s", node, exc)
                    return False
            return True

        for (batch, node, body), created in zip(bodies, _at_once(create, bodies), strict=True):
            if created:
                for image in batch:
                    in_flight[(image, node)] = body["metadata"]["name"]
                    report.started.append((image, node))

    def _remove(self, name: str) -> None:
        try:
            self._kube.delete_pod(self._namespace, name)
        except KubernetesError as exc:
            logger.warning("cannot remove prepull pod %s: %s", name, exc)


_DONE = "done"
_PULLING = "pulling"
CALLS_AT_ONCE = 8
"""Kubernetes calls one pass makes at once when it starts or removes many pull pods."""

T = TypeVar("T")
R = TypeVar("R")


def _at_once(call: Callable[[T], R], items: list[T]) -> list[R]:
    """``call`` on every item, a few at a time (greenlets under gevent), results in order."""
    if len(items) <= 1:
        return [call(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(CALLS_AT_ONCE, len(items))) as pool:
        return list(pool.map(call, items))


def _progress(pod: dict[str, Any], images: list[str]) -> list[tuple[str, str]]:
    """Each image of a pull pod with ``done``, ``pulling``, or why its pull failed."""
    status = pod.get("status") or {}
    containers = {
        str(c.get("name")): c
        for c in [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]
    }
    succeeded = status.get("phase") == "Succeeded"
    result = []
    for index, image in enumerate(images):
        state = (containers.get(pull_container_name(index)) or {}).get("state") or {}
        waiting = state.get("waiting") or {}
        if succeeded or state.get("terminated") is not None or state.get("running") is not None:
            # A container that ran means its image was pulled, whatever the command did.
            result.append((image, _DONE))
        elif waiting.get("reason") in _PULL_ERRORS:
            message = waiting.get("message") or "image pull failed"
            result.append((image, f"{waiting['reason']}: {message}"))
        else:
            result.append((image, _PULLING))
    if status.get("phase") == "Failed" and all(state == _PULLING for _, state in result):
        reason = status.get("message") or status.get("reason") or "the pull pod failed"
        result[0] = (images[0], reason) if images else result[0]
    return result


def _timed_out(pod: dict[str, Any], now: float, timeout: float) -> bool:
    created = parse_iso((pod.get("metadata") or {}).get("creationTimestamp"))
    return created is not None and now - created > timeout


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


def _status(
    sets: list[tuple[Any, Any]],
    placements: list[Placement],
    nodes: list[NodeImages],
    failures: dict[str, PullFailure],
    in_flight: dict[tuple[str, str], str],
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
                        "retry": iso_utc(f.retry_at),
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
    return {"updated": iso_utc(now), "configs": configs, "nodes": node_reports}, everywhere


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

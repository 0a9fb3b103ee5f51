"""Follow a workload's pod until it is ready, telling the user what Kubernetes says.

The pod is watched (a short watch at a time, so a superseded operation or the deadline is
noticed; a watch lost on the way is opened again from a fresh read), through the process's
shared feed of the kind's pods when the caller follows one (``app.engine.feeds``), else on
a watch of its own; each change is judged by
``pods.judge``: ready ends the wait, a failure raises
``StepFailed`` at once with the reason. Meanwhile the Kubernetes Events about the pod
(scheduling, image pulls, container starts: the messages users see) become the
operation's info and error events, and move its progress bar.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from app.engine.feeds import Follower
from app.engine.kind import StepFailed
from app.engine.pods import judge
from app.engine.reporter import Reporter
from app.engine.waiting import pause_after_failed_watch
from app.storage.kubernetes import KubernetesError, KubernetesStorage, WatchExpired

EVENT_POLL_SECONDS = 0.5
"""How often, at most, a changing pod makes the follower list its namespace's Events. The
first listing comes that long after the first look at the pod: one ready sooner has
nothing to tell. A pod that fails is listed at once, for the Events that say why."""


@dataclass(frozen=True)
class PodProgress:
    """Where the progress bar stands at each stage of a pod's start."""

    scheduled: int = 55
    provisioning: int = 60
    """An Event about an init container: provisioning runs before the image pull."""
    by_reason: dict[str, int] = field(
        # Events about the workload's own container, by their reason.
        default_factory=lambda: {"Pulling": 65, "Pulled": 75, "Created": 80, "Started": 90}
    )


@dataclass(frozen=True)
class PodToFollow:
    """The pod, where it is, and how to speak of it."""

    namespace: str
    name: str
    noun: str = "lab"
    """Names the workload in messages: "the lab pod was deleted while starting"."""
    progress: PodProgress = field(default_factory=PodProgress)


PodChanges = Callable[[str | None, int], Iterator[tuple[str, dict[str, Any]]]]
"""``(version, seconds)``: the pod's changes after the read at ``version``, for that long."""


def follow_until_ready(
    kube: KubernetesStorage,
    reporter: Reporter,
    pod: PodToFollow,
    first_look: dict[str, Any] | None,
    follower: Follower | None = None,
) -> None:
    """Return once the pod is ready; raise ``StepFailed`` as soon as it cannot become so.

    ``first_look`` is the pod as the caller just read it (None: it is gone), so that read
    can go out beside the caller's other work. ``follower``: the caller's subscription to
    its kind's pod feed, taken before that read; without it the pod is watched alone.
    """
    changes: PodChanges = (
        follower.changes if follower else partial(kube.watch_pod, pod.namespace, pod.name)
    )
    events = _EventFeed(kube, reporter, pod)
    version: str | None = None
    uid: str | None = None
    first = True
    while True:
        if not first:
            reporter.check()
        if version is None:
            current = first_look if first else kube.read_pod(pod.namespace, pod.name)
            if current is None:
                raise StepFailed(f"the {pod.noun} pod was deleted while starting")
            uid = current["metadata"].get("uid")
            events.pod_uid(uid)
            if _settled(reporter, events, pod, current):
                return
            version = current["metadata"]["resourceVersion"]
        first = False
        timeout = max(1, min(2, int(reporter.remaining())))
        try:
            for kind, changed in changes(version, timeout):
                if uid and changed["metadata"].get("uid") not in (None, uid):
                    continue  # An earlier pod of that name, going away.
                version = changed["metadata"].get("resourceVersion", version)
                if kind == "DELETED":
                    raise StepFailed(f"the {pod.noun} pod was deleted while starting")
                if _settled(reporter, events, pod, changed):
                    return
                reporter.check()
        except WatchExpired:
            version = None
            continue
        except KubernetesError as exc:
            # Lost on the way: read the pod afresh and watch again.
            pause_after_failed_watch(reporter, exc)
            version = None
            continue
        events.poll()


def _settled(
    reporter: Reporter, events: _EventFeed, pod: PodToFollow, current: dict[str, Any]
) -> bool:
    verdict = judge(current, pod.noun)
    if verdict.failure:
        events.poll()
        raise StepFailed(verdict.failure, verdict.reason)
    if verdict.ready:
        return True
    if verdict.scheduled_on:
        reporter.progress(pod.progress.scheduled)
    events.poll(at_most_every=EVENT_POLL_SECONDS)
    return False


class _EventFeed:
    """Reports new Kubernetes Events about the pod as the operation's events."""

    def __init__(self, kube: KubernetesStorage, reporter: Reporter, pod: PodToFollow) -> None:
        self._kube = kube
        self._reporter = reporter
        self._pod = pod
        self._seen: set[tuple[str, int]] = set()
        self._pod_uid: str | None = None
        self._last_poll = time.monotonic()

    def pod_uid(self, uid: str | None) -> None:
        self._pod_uid = uid

    def poll(self, at_most_every: float = 0.0) -> None:
        """Report events not reported yet; skipped if the last look is that recent."""
        now = time.monotonic()
        if now - self._last_poll < at_most_every:
            return
        self._last_poll = now
        relevant = [e for e in self._kube.list_events(self._pod.namespace) if self._about_pod(e)]
        relevant.sort(key=lambda e: int(e.get("metadata", {}).get("resourceVersion") or 0))
        for event in relevant:
            key = (event["metadata"].get("uid", event["metadata"]["name"]), event.get("count", 1))
            if key in self._seen:
                continue
            self._seen.add(key)
            message = event.get("message") or event.get("reason") or ""
            if event.get("type") == "Warning":
                self._reporter.error(message)
            else:
                self._reporter.info(message)
            percent = self._percent(event)
            if percent is not None:
                self._reporter.progress(percent)

    def _about_pod(self, event: dict[str, Any]) -> bool:
        involved = event.get("involvedObject") or {}
        return involved.get("name") == self._pod.name and (
            self._pod_uid is None or involved.get("uid") in (None, self._pod_uid)
        )

    def _percent(self, event: dict[str, Any]) -> int | None:
        progress = self._pod.progress
        field_path = str((event.get("involvedObject") or {}).get("fieldPath") or "")
        if field_path.startswith("spec.initContainers"):
            return progress.provisioning
        reason = str(event.get("reason"))
        if reason == "Scheduled":
            return progress.scheduled
        return progress.by_reason.get(reason)

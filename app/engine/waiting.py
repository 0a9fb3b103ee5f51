"""Wait, by watching, for Kubernetes objects to disappear within an operation's time.

A watch that fails on the way (a dropped connection, a 5xx, a 429) is opened again after a
short pause, from a fresh read: the object's disappearance is read from Kubernetes, so a
lost watch costs a moment, never the operation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from app.engine.feeds import Follower
from app.engine.reporter import Reporter
from app.storage.kubernetes import KubernetesError, KubernetesStorage, WatchExpired, is_transient

WATCH_RETRY_SECONDS = 0.5
"""The pause before a failed watch is opened again."""


def wait_pod_gone(
    kube: KubernetesStorage,
    reporter: Reporter,
    namespace: str,
    name: str,
    follower: Follower | None = None,
) -> None:
    """Return once the pod is gone. ``follower``: the caller's subscription to its kind's
    pod feed (``app.engine.feeds``); without it the pod is watched alone."""
    _wait_gone(
        reporter,
        read=partial(kube.read_pod, namespace, name),
        watch=follower.changes if follower else partial(kube.watch_pod, namespace, name),
    )


def wait_namespace_gone(
    kube: KubernetesStorage,
    reporter: Reporter,
    name: str,
    last_seen: dict[str, Any] | None = None,
    follower: Follower | None = None,
) -> None:
    """Return once the namespace is gone; ``last_seen`` (the delete's answer, say) saves the
    first read. ``follower``: the caller's subscription to a feed of namespaces
    (``app.engine.feeds``), taken before that read; without it the namespace is watched
    alone."""
    _wait_gone(
        reporter,
        read=partial(kube.read_namespace, name),
        watch=follower.changes if follower else partial(kube.watch_namespace, name),
        last_seen=last_seen,
    )


def _wait_gone(
    reporter: Reporter,
    *,
    read: Callable[[], dict[str, Any] | None],
    watch: Callable[[str, int], Iterator[tuple[str, dict[str, Any]]]],
    last_seen: dict[str, Any] | None = None,
) -> None:
    """Return once the object ``read`` finds is gone: read it, watch it from the version
    read (``watch(resource_version, seconds)``) until it is deleted, and again. Only the
    deletion of the object read counts, not that of an earlier one of the same name (which
    a shared feed may still be telling of)."""
    while True:
        reporter.check()
        found = last_seen or read()
        last_seen = None
        if found is None:
            return
        version = found["metadata"]["resourceVersion"]
        uid = found["metadata"].get("uid")
        try:
            for kind, changed in watch(version, _watch_seconds(reporter)):
                if kind == "DELETED" and changed["metadata"].get("uid") in (None, uid):
                    return
        except WatchExpired:
            continue
        except KubernetesError as exc:
            pause_after_failed_watch(reporter, exc)


def await_pods_change(
    kube: KubernetesStorage,
    reporter: Reporter,
    namespace: str,
    selector: str,
    version: str | None,
) -> None:
    """Return at the first change of the pods ``selector`` matches in ``namespace`` since
    ``version`` (None: from now), or after a short watch without one, so that a step
    following pods reads them again soon whatever happened (an object that is not a pod may
    have changed). A failed watch pauses as ``pause_after_failed_watch`` says."""
    try:
        for _ in kube.watch_pods(namespace, selector, version, _watch_seconds(reporter)):
            return
    except WatchExpired:
        return
    except KubernetesError as exc:
        pause_after_failed_watch(reporter, exc)


def pause_after_failed_watch(reporter: Reporter, exc: KubernetesError) -> None:
    """Re-raise a lasting failure; after a transient one, wait a moment (within the
    operation's time) before the caller reads and watches again."""
    if not is_transient(exc):
        raise exc
    time.sleep(min(WATCH_RETRY_SECONDS, max(0.0, reporter.remaining())))


def _watch_seconds(reporter: Reporter) -> int:
    """Short watches: each return is a chance to notice a superseded operation or the
    deadline (``reporter.check``)."""
    return max(1, min(2, int(reporter.remaining())))

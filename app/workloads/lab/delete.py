"""The steps of a lab's delete: its namespace, and with it everything in it.

Deleting the namespace stops the pod as deleting the pod would (Kubernetes gives it its
grace period) and removes every other object of the lab, so the delete is three calls in
turn (read the namespace, delete it, watch it go from the delete's answer) rather than a
pod delete and its wait first.

The operators' objects in it (a user's compute clusters) go first, while the namespace still
takes writes: the namespace's deletion removes a DaskCluster's worker group at once but only
marks the cluster, which the Dask operator's finalizer holds; its handler then fails to find
the group and retries a minute later, so the namespace would stay that long. Deleted first,
each goes in the time its operator takes to let it go, with the group still there.
"""

from __future__ import annotations

import time

from app.builders.names import OURS_SELECTOR, lab_namespace
from app.concurrency import concurrently
from app.engine.kind import Run
from app.engine.waiting import wait_namespace_gone
from app.storage.kubernetes import CustomKind, is_ours
from app.workloads.context import WorkloadContext

DELETED = "The lab is deleted"
"""The delete's last event, announced with its ``complete`` when the record goes."""

RELEASE_POLL_SECONDS = 0.1
"""How often the delete looks whether the operators let their objects go."""
RELEASE_SECONDS = 30.0
"""The longest the delete waits for them before deleting the namespace anyway (an operator
that is down holds them, and the namespace with them, until it is back)."""


def run_delete(ctx: WorkloadContext, run: Run) -> None:
    reporter = run.reporter
    username = run.operation.ref.name
    namespace = lab_namespace(ctx.config.namespace_prefix, username)
    existing = ctx.kube.read_namespace(namespace)
    if existing is None:
        reporter.info(f"Namespace {namespace} is already gone", progress=10)
    elif not is_ours(existing):
        # A namespace of that name the service never made (a spawn refused to use it, so
        # nothing of the lab is in it).
        reporter.info(f"Namespace {namespace} is not the service's; leaving it alone", progress=10)
    else:
        release_operator_objects(ctx, run, namespace)
        # Subscribed before the delete, whose answer is the first look at the namespace.
        with ctx.feeds.feed("namespaces", OURS_SELECTOR).follow(None, namespace) as follower:
            # Announced beside the call rather than before it: one Redis write fewer in turn.
            answer, _ = concurrently(
                lambda: ctx.kube.delete_namespace(namespace),
                lambda: reporter.info("Stopping the lab and removing its namespace", progress=30),
            )
            with run.waiting():
                wait_namespace_gone(ctx.kube, reporter, namespace, answer, follower)


def release_operator_objects(ctx: WorkloadContext, run: Run, namespace: str) -> None:
    """Delete the operators' objects in the namespace, one call a kind at once, and wait
    (at most ``RELEASE_SECONDS``) until their operators have let each of them go (a user
    holds a few clusters: a read each is less than a list of every kind)."""
    kinds = held_kinds(ctx, run, run.operation.ref.name)
    if not kinds:
        return
    deleted = concurrently(
        *(lambda kind=kind: ctx.kube.delete_custom_collection(kind, namespace) for kind in kinds)
    )
    held = [(kind, name) for kind, names in zip(kinds, deleted, strict=True) for name in names]
    if not held:
        return
    run.reporter.info("Waiting for the operators to let the lab's clusters go", progress=20)
    deadline = time.monotonic() + RELEASE_SECONDS
    with run.waiting():
        while held and time.monotonic() < deadline:
            run.reporter.check()
            time.sleep(RELEASE_POLL_SECONDS)
            held = [
                (kind, name)
                for kind, name in held
                if ctx.kube.read_custom(kind, namespace, name) is not None
            ]


def held_kinds(ctx: WorkloadContext, run: Run, owner: str) -> list[CustomKind]:
    """The operators' kinds the owner may have objects of: those of every kind of workload
    the owner has a record of, or of which Redis may lack some while it is rebuilt. Most
    users have none, and their delete then makes no call for them (one Redis read a kind)."""
    prefix = f"{owner}/"
    kinds: list[CustomKind] = []
    for workload_kind, custom in ctx.operator_objects.items():
        stored = run.workloads.stored_names(workload_kind)
        if not stored.complete or any(name.startswith(prefix) for name in stored.names):
            kinds.extend(custom)
    return kinds

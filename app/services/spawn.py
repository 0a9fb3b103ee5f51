"""The steps of a spawn. Each is idempotent, so a worker that resumes a spawn another
worker started simply runs them again from the top."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.builders.lab import LabObjects, build_lab
from app.builders.names import lab_namespace, object_name
from app.builders.namespace import build_namespace
from app.errors import ServiceError
from app.models.identity import user_from_json
from app.models.images import image_from_json
from app.models.lab import LabOptions, LabRecord, LabSpec, LabStatus, PodState
from app.services.concurrency import concurrently
from app.services.context import LabContext
from app.services.pod_state import judge
from app.services.records import lab_record
from app.services.registries import split_reference
from app.services.reporter import Reporter
from app.services.waiting import wait_namespace_gone, wait_pod_gone
from app.storage.events import EventType
from app.storage.kubernetes import KubernetesError, WatchExpired, is_ours
from app.storage.registry import RegistryNotFound

logger = logging.getLogger(__name__)

OPERATION_ANNOTATION = "lab-spawner.jupyter.org/operation"
"""Marks which operation created a pod, so a resumed spawn adopts its own pod."""

SCHEDULED_PROGRESS = 55
_EVENT_PROGRESS = {
    "Scheduled": SCHEDULED_PROGRESS,
    "Pulling": 65,
    "Pulled": 75,
    "Created": 80,
    "Started": 90,
}
_PROVISIONING_PROGRESS = 60

EVENT_POLL_SECONDS = 0.5
"""How often, at most, a changing pod makes the spawn list its namespace's Events (the
Events carry the messages users see: scheduling, pulls, starts). The first listing comes
that long after the first look at the pod: one ready sooner has nothing to tell, and most
are (an instant kubelet's in about a millisecond). A pod that fails is listed at once, for
the Events that say why; one that is ready ends the waiting at once."""


class SpawnFailed(Exception):
    """The lab cannot start; the message says why in terms a user can act on."""


@dataclass(frozen=True)
class HeadStart:
    """What the request that queued a spawn did for the worker running it at once: it
    announced the start (``starting_events``) and learnt whether the user was provisioned."""

    provisioned: bool


@dataclass(frozen=True)
class Spawned:
    """A running lab's record, and events of the spawn still to announce with it."""

    record: LabRecord
    events: list[tuple[EventType, str]]


STARTING_PROGRESS = 2
OBJECTS_CREATED = "Lab objects created; waiting for Kubernetes to start the lab"
OBJECTS_CREATED_PROGRESS = 45


def starting_message(spec: LabSpec) -> str:
    return f"Starting a lab for {spec.username} with image {spec.image.name}"


def starting_events(spec: LabSpec) -> list[tuple[EventType, str]]:
    """The events announcing that a worker starts making the lab."""
    return [(EventType.INFO, starting_message(spec)), (EventType.PROGRESS, str(STARTING_PROGRESS))]


def spec_from_operation(ctx: LabContext, data: dict[str, Any]) -> LabSpec:
    options = LabOptions(**data["options"])
    image = image_from_json(data["image"])
    size = ctx.config.lab.size(options.size)
    if size is None:
        raise SpawnFailed(f"the chosen size {options.size} is no longer configured")
    return LabSpec(
        user=user_from_json(data["user"]),
        options=options,
        image=image,
        size=size,
        env=dict(data.get("env") or {}),
    )


def run_spawn(
    ctx: LabContext, reporter: Reporter, token: str, head_start: HeadStart | None = None
) -> Spawned:
    """Create the lab and wait until it is reachable; returns its running record."""
    operation = reporter.operation
    assert operation.spec is not None
    spec = _pinned(ctx, reporter, spec_from_operation(ctx, operation.spec))
    config = ctx.config
    namespace = lab_namespace(config.namespace_prefix, spec.username)
    pod_name = object_name(spec.username, "lab")

    # The namespace is created at once, together with the reads the other objects need,
    # rather than after looking for leftovers: a lab's namespace is almost always new, and
    # a new namespace holds nothing to clean up. Events are written alongside the calls
    # they announce, not before them: a write is a Redis round trip the spawn need not
    # wait for. A spawn run at once by the worker that queued it (``head_start``) was
    # announced, and its provisioning looked up, by the script that queued it.
    namespace_body = build_namespace(spec, namespace)
    calls: list[Callable[[], Any]] = [
        lambda: _try_create_namespace(ctx, namespace_body),
        lambda: _read_copied_secrets(ctx),
    ]
    provision = bool(config.lab.init_containers)
    if head_start is not None:
        provision = provision and not head_start.provisioned
    else:
        calls.append(lambda: provision and not ctx.labs.is_provisioned(spec.username))
        calls.append(lambda: reporter.info(starting_message(spec), progress=STARTING_PROGRESS))
    created, (copied, pull), *rest = concurrently(*calls)
    if rest:
        provision = rest[0]
    own_pod = not created and _take_over_namespace(ctx, reporter, namespace_body, pod_name)
    objects = build_lab(
        spec, config, token=token, copied_secrets=copied, pull_secret_data=pull, provision=provision
    )
    objects.pod["metadata"].setdefault("annotations", {})[OPERATION_ANNOTATION] = operation.id
    _create_objects(ctx, reporter, objects, pod_absent=not own_pod)
    pod = ctx.kube.read_pod(namespace, pod_name)
    first_look = judge(pod) if pod is not None else None
    announced: list[tuple[EventType, str]] = []
    if first_look is not None and first_look.ready:
        # Ready at the first look: the objects' event goes out with the lab's last ones, in
        # the script that records it running, rather than in a write of its own.
        announced = [
            (EventType.INFO, OBJECTS_CREATED),
            (EventType.PROGRESS, str(OBJECTS_CREATED_PROGRESS)),
        ]
    else:
        # A pod scheduled already is announced as such in the same write.
        reporter.info(
            OBJECTS_CREATED,
            progress=(OBJECTS_CREATED_PROGRESS, SCHEDULED_PROGRESS)
            if first_look is not None and first_look.scheduled_on
            else OBJECTS_CREATED_PROGRESS,
        )
        _wait_until_ready(ctx, reporter, namespace, pod_name, pod)
    if provision:
        ctx.labs.mark_provisioned(spec.username)

    record = lab_record(
        spec, config, status=LabStatus.RUNNING, pod=PodState.PRESENT, reachable=True
    )
    return Spawned(record, announced)


def _pinned(ctx: LabContext, reporter: Reporter, spec: LabSpec) -> LabSpec:
    """The spec with its image pinned to a digest. Images from the form's radio list come
    pinned already; one picked from the dropdown may be a tag nobody resolved yet, so its
    digest is asked for here, off the request path, and remembered for the next user."""
    image = spec.image
    if image.digest is not None:
        return spec
    try:
        host, repository, tag = split_reference(image.reference)
        digest = ctx.registries.client(host).digest(repository, tag)
    except RegistryNotFound:
        raise SpawnFailed(f"image {image.reference} no longer exists in its registry") from None
    except (ValueError, ServiceError) as exc:
        # The image may well be cached on the node; running it by tag beats not running.
        reporter.error(f"Could not pin {image.name} to a digest ({exc}); starting it by tag")
        return spec
    ctx.images.remember_digest(image.reference, digest)
    return dataclasses.replace(spec, image=dataclasses.replace(image, digest=digest))


def _take_over_namespace(
    ctx: LabContext, reporter: Reporter, body: dict[str, Any], pod_name: str
) -> bool:
    """Make the lab namespace that already existed ready for this spawn: wait out its
    deletion and create it again, or clear the pod a failed lab left in it. True if the pod
    there is the one this operation made before a worker died."""
    namespace = body["metadata"]["name"]
    while True:
        existing = ctx.kube.read_namespace(namespace)
        if existing is None:
            if _try_create_namespace(ctx, body):
                return False
            continue
        if existing.get("metadata", {}).get("deletionTimestamp"):
            reporter.info("Waiting for the previous lab's namespace to be removed")
            wait_namespace_gone(ctx, reporter, namespace)
            continue
        if not is_ours(existing):
            # Everything the lab needs goes into this namespace, Secrets written without
            # being read first among them: it must be ours.
            raise KubernetesError(
                409, "AlreadyExists", f"namespace {namespace} exists and is not ours"
            )
        break
    pod = ctx.kube.read_pod(namespace, pod_name)
    if pod is None:
        return False
    annotations = pod.get("metadata", {}).get("annotations") or {}
    if annotations.get(OPERATION_ANNOTATION) == reporter.operation.id:
        return True
    reporter.info("Removing the pod of the previous lab")
    ctx.kube.delete_pod(namespace, pod_name)
    wait_pod_gone(ctx, reporter, namespace, pod_name)
    return False


def _read_copied_secrets(ctx: LabContext) -> tuple[dict[str, str], dict[str, str] | None]:
    lab = ctx.config.lab
    source = ctx.config.kubernetes.service_namespace
    copied: dict[str, str] = {}
    cache: dict[str, dict[str, Any] | None] = {}
    for entry in lab.secrets:
        if entry.secret_name not in cache:
            cache[entry.secret_name] = ctx.kube.read_secret(source, entry.secret_name)
        secret = cache[entry.secret_name]
        value = ((secret or {}).get("data") or {}).get(entry.secret_key)
        if value is None:
            raise SpawnFailed(
                f"configured secret {entry.secret_name} has no key {entry.secret_key}; "
                "ask an administrator"
            )
        copied[entry.secret_key] = value
    pull: dict[str, str] | None = None
    if lab.pull_secret:
        secret = ctx.kube.read_secret(source, lab.pull_secret)
        if secret is None or not secret.get("data"):
            raise SpawnFailed(f"configured pull secret {lab.pull_secret} is missing")
        pull = dict(secret["data"])
    return copied, pull


def _create_objects(
    ctx: LabContext, reporter: Reporter, objects: LabObjects, *, pod_absent: bool
) -> None:
    """Everything the pod needs at once, then the pod (the namespace exists already)."""
    steps = objects.in_creation_order()
    concurrently(
        *(
            functools.partial(ctx.kube.apply, resource, body)
            for resource, body in steps
            if resource not in ("namespaces", "pods")
        ),
    )
    for resource, body in steps:
        if resource == "pods":
            _create_pod(ctx, reporter, body, known_absent=pod_absent)


def _try_create_namespace(ctx: LabContext, body: dict[str, Any]) -> bool:
    """Create the lab namespace; False if it already exists."""
    try:
        ctx.kube.create_namespace(body)
    except KubernetesError as exc:
        if exc.status != 409:
            raise
        return False
    return True


def _create_pod(
    ctx: LabContext, reporter: Reporter, body: dict[str, Any], *, known_absent: bool
) -> None:
    """Create the lab pod, or adopt the one this operation made before a worker died.

    The existing pod is looked for first: the API server admits a pod against the quota
    before it checks the name, so creating a second copy of our own pod would be refused
    as over quota rather than as a duplicate.
    """
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    check = not known_absent
    while True:
        existing = ctx.kube.read_pod(namespace, name) if check else None
        check = True
        if existing is not None:
            annotations = existing.get("metadata", {}).get("annotations") or {}
            if annotations.get(OPERATION_ANNOTATION) == reporter.operation.id:
                return
            ctx.kube.delete_pod(namespace, name)
            wait_pod_gone(ctx, reporter, namespace, name)
        try:
            ctx.kube.create_pod(body)
            return
        except KubernetesError as exc:
            if exc.status == 409:
                continue
            if exc.status == 403 and "quota" in exc.message.lower():
                raise SpawnFailed(f"Kubernetes refused the lab: {exc.message}") from None
            raise


class _EventFeed:
    """Reports new Kubernetes Events about the pod as the user's info and error events."""

    def __init__(self, ctx: LabContext, reporter: Reporter, namespace: str, pod: str) -> None:
        self._ctx = ctx
        self._reporter = reporter
        self._namespace = namespace
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
        events = self._ctx.kube.list_events(self._namespace)
        relevant = [
            e
            for e in events
            if (e.get("involvedObject") or {}).get("name") == self._pod
            and (
                self._pod_uid is None
                or (e.get("involvedObject") or {}).get("uid") in (None, self._pod_uid)
            )
        ]
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
            field_path = str((event.get("involvedObject") or {}).get("fieldPath") or "")
            if field_path.startswith("spec.initContainers"):
                # Provisioning runs before the lab's own image pull and start.
                percent: int | None = _PROVISIONING_PROGRESS
            else:
                percent = _EVENT_PROGRESS.get(str(event.get("reason")))
            if percent is not None:
                self._reporter.progress(percent)


def _wait_until_ready(
    ctx: LabContext,
    reporter: Reporter,
    namespace: str,
    name: str,
    first_look: dict[str, Any] | None,
) -> None:
    """Follow the pod, as first read in ``first_look``, until it is ready or clearly cannot
    become ready."""
    feed = _EventFeed(ctx, reporter, namespace, name)
    version: str | None = None
    first = True
    while True:
        if not first:
            # The first look needs no check: the event written with it did it.
            reporter.check()
        if version is None:
            pod = first_look if first else ctx.kube.read_pod(namespace, name)
            if pod is None:
                raise SpawnFailed("the lab pod was deleted while starting")
            feed.pod_uid(pod["metadata"].get("uid"))
            if _settled(reporter, feed, pod):
                return
            version = pod["metadata"]["resourceVersion"]
        first = False
        timeout = max(1, min(2, int(reporter.remaining())))
        try:
            for kind, pod in ctx.kube.watch_pod(namespace, name, version, timeout):
                version = pod["metadata"].get("resourceVersion", version)
                if kind == "DELETED":
                    raise SpawnFailed("the lab pod was deleted while starting")
                if _settled(reporter, feed, pod):
                    return
                reporter.check()
        except WatchExpired:
            version = None
            continue
        feed.poll()


def _settled(reporter: Reporter, feed: _EventFeed, pod: dict[str, Any]) -> bool:
    verdict = judge(pod)
    if verdict.failure:
        feed.poll()
        raise SpawnFailed(verdict.failure)
    if verdict.ready:
        # "The lab is running" is announced with the running record (``LabStore.finish``).
        return True
    if verdict.scheduled_on:
        reporter.progress(SCHEDULED_PROGRESS)
    feed.poll(at_most_every=EVENT_POLL_SECONDS)
    return False


def failed_record(ctx: LabContext, reporter: Reporter, message: str) -> LabRecord | None:
    """The lab's record after a failed spawn: status failed, pod as Kubernetes has it."""
    current = ctx.labs.get(reporter.username)
    if current is None:
        return None
    namespace = lab_namespace(ctx.config.namespace_prefix, reporter.username)
    try:
        present = ctx.kube.read_pod(namespace, object_name(reporter.username, "lab")) is not None
    except KubernetesError:
        present = current.pod == PodState.PRESENT
    current.status = LabStatus.FAILED
    current.pod = PodState.PRESENT if present else PodState.MISSING
    current.error = message
    return current

"""The steps of a lab's spawn. Each is idempotent, so a worker that resumes a spawn another
worker started simply runs them again from the top.

In order: pin the image to a digest; create the namespace while reading the Secrets to
copy and whether the user needs provisioning; create everything the pod needs; create the
pod; follow it until it is ready.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from app.builders.names import lab_namespace, object_name
from app.concurrency import concurrently
from app.engine.following import PodToFollow, follow_until_ready
from app.engine.kind import Run, StepFailed
from app.engine.pods import judge
from app.engine.reporter import Reporter
from app.engine.waiting import wait_namespace_gone, wait_pod_gone
from app.errors import ServiceError
from app.metrics import FailureReason
from app.models.identity import user_from_json
from app.models.images import image_from_json
from app.models.lab import LabApi, LabOptions, LabRecord, LabSpec, PodState
from app.models.workload import WorkloadStatus
from app.storage.events import EventType
from app.storage.kubernetes import KubernetesError, is_ours
from app.storage.registries import split_reference
from app.storage.registry import RegistryNotFound
from app.workloads.context import WorkloadContext
from app.workloads.lab.builders import LabObjects, build_lab, build_namespace
from app.workloads.lab.records import lab_record, reachable_at
from app.workloads.lab.tracking import LAB_POD_SELECTOR

OPERATION_ANNOTATION = "lab-spawner.jupyter.org/operation"
"""Marks which operation created a pod, so a resumed spawn adopts its own pod."""

STARTING_PROGRESS = 2
OBJECTS_CREATED = "Lab objects created; waiting for Kubernetes to start the lab"
OBJECTS_CREATED_PROGRESS = 45


@dataclass(frozen=True)
class CopiedSecrets:
    """What the lab's Secret takes from Secrets in the service's namespace."""

    keys: dict[str, str]
    """Configured keys, base64-encoded as read."""
    pull: dict[str, str] | None
    """The pull secret's data, when one is configured."""


def spec_from_operation(ctx: WorkloadContext, data: dict[str, Any]) -> LabSpec:
    options = LabOptions(**data["options"])
    size = ctx.config.lab.size(options.size)
    if size is None:
        raise StepFailed(f"the chosen size {options.size} is no longer configured")
    return LabSpec(
        user=user_from_json(data["user"]),
        options=options,
        image=image_from_json(data["image"]),
        size=size,
        env=dict(data.get("env") or {}),
        api=LabApi(data.get("api", LabApi.DMTN_222)),
    )


def starting_events(spec: LabSpec) -> list[tuple[EventType, str]]:
    """The events announcing that a run starts making the lab."""
    return [
        (EventType.INFO, f"Starting a lab for {spec.username} with image {spec.image.name}"),
        (EventType.PROGRESS, str(STARTING_PROGRESS)),
    ]


def run_spawn(ctx: WorkloadContext, run: Run) -> LabRecord:
    """Create the lab and wait until it is reachable; returns its running record."""
    reporter = run.reporter
    if run.secret is None:
        raise StepFailed("the spawn's token expired before it could be used")
    assert run.operation.spec is not None
    spec = _pinned(ctx, reporter, spec_from_operation(ctx, run.operation.spec))
    config = ctx.config
    namespace = lab_namespace(config.namespace_prefix, spec.username)
    pod_name = object_name(spec.username, "lab")

    # The namespace is created at once, beside the reads the other objects need: a lab's
    # namespace is almost always new, and a new one holds nothing to clean up. Only when
    # it exists already is it looked at (``_take_over_namespace``).
    namespace_body = build_namespace(spec, namespace)
    provisioning = bool(config.lab.init_containers)
    created, copied, unprovisioned, _ = concurrently(
        lambda: _try_create_namespace(ctx, namespace_body),
        lambda: _read_copied_secrets(ctx),
        lambda: provisioning and not ctx.labs.is_provisioned(spec.username),
        lambda: reporter.write(starting_events(spec)),
    )
    own_pod = not created and _take_over_namespace(ctx, reporter, namespace_body, pod_name)
    objects = build_lab(
        spec,
        config,
        token=run.secret,
        copied_secrets=copied.keys,
        pull_secret_data=copied.pull,
        provision=unprovisioned,
    )
    objects.pod["metadata"].setdefault("annotations", {})[OPERATION_ANNOTATION] = run.operation.id
    service = _create_objects(ctx, reporter, objects, pod_absent=not own_pod)
    created_events = [
        (EventType.INFO, OBJECTS_CREATED),
        (EventType.PROGRESS, str(OBJECTS_CREATED_PROGRESS)),
    ]
    # Subscribed before the first look, so that every change after it reaches the wait.
    with ctx.feeds.feed("pods", LAB_POD_SELECTOR).follow(namespace, pod_name) as follower:
        first_look = ctx.kube.read_pod(namespace, pod_name)
        if first_look is not None and judge(first_look, "lab").ready:
            # Ready at the first look: the objects' event goes out with the lab's last
            # ones, in the step that records it running, rather than in a write of its own.
            reporter.at_end(created_events)
        else:
            reporter.write(created_events)
            with run.waiting():
                follow_until_ready(
                    ctx.kube, reporter, PodToFollow(namespace, pod_name), first_look, follower
                )
    if unprovisioned:
        # Only now: the provisioning container is idempotent and ran to its end.
        ctx.labs.mark_provisioned(spec.username)
    url = reachable_at(ctx.kube, config, spec.username, service=service)
    record = lab_record(spec, config, status=WorkloadStatus.RUNNING, pod=PodState.PRESENT, url=url)
    return record


def _pinned(ctx: WorkloadContext, reporter: Reporter, spec: LabSpec) -> LabSpec:
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
        raise StepFailed(f"image {image.reference} no longer exists in its registry") from None
    except (ValueError, ServiceError) as exc:
        # The image may well be cached on the node; running it by tag beats not running.
        reporter.error(f"Could not pin {image.name} to a digest ({exc}); starting it by tag")
        return spec
    ctx.images.remember_digest(image.reference, digest)
    return dataclasses.replace(spec, image=dataclasses.replace(image, digest=digest))


def _take_over_namespace(
    ctx: WorkloadContext, reporter: Reporter, body: dict[str, Any], pod_name: str
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
            wait_namespace_gone(ctx.kube, reporter, namespace)
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
    if _made_by(pod, reporter):
        return True
    reporter.info("Removing the pod of the previous lab")
    ctx.kube.delete_pod(namespace, pod_name)
    wait_pod_gone(ctx.kube, reporter, namespace, pod_name)
    return False


def _made_by(pod: dict[str, Any], reporter: Reporter) -> bool:
    annotations = pod.get("metadata", {}).get("annotations") or {}
    return bool(annotations.get(OPERATION_ANNOTATION) == reporter.operation.id)


def _read_copied_secrets(ctx: WorkloadContext) -> CopiedSecrets:
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
            raise StepFailed(
                f"configured secret {entry.secret_name} has no key {entry.secret_key}; "
                "ask an administrator"
            )
        copied[entry.secret_key] = value
    pull: dict[str, str] | None = None
    if lab.pull_secret:
        secret = ctx.kube.read_secret(source, lab.pull_secret)
        if secret is None or not secret.get("data"):
            raise StepFailed(f"configured pull secret {lab.pull_secret} is missing")
        pull = dict(secret["data"])
    return CopiedSecrets(copied, pull)


def _create_objects(
    ctx: WorkloadContext, reporter: Reporter, objects: LabObjects, *, pod_absent: bool
) -> dict[str, Any]:
    """Everything the pod needs at once, then the pod (the namespace exists already).

    Returns the Service as Kubernetes stored it, which holds the address it was given."""
    steps = objects.in_creation_order()
    before_pod = [(r, b) for r, b in steps if r not in ("namespaces", "pods")]
    applied = concurrently(
        *(functools.partial(ctx.kube.apply, resource, body) for resource, body in before_pod)
    )
    for resource, body in steps:
        if resource == "pods":
            _create_pod(ctx, reporter, body, known_absent=pod_absent)
    return next(obj for (r, _), obj in zip(before_pod, applied, strict=True) if r == "services")


def _try_create_namespace(ctx: WorkloadContext, body: dict[str, Any]) -> bool:
    """Create the lab namespace; False if it already exists."""
    try:
        ctx.kube.create_namespace(body)
    except KubernetesError as exc:
        if exc.status != 409:
            raise
        return False
    return True


def _create_pod(
    ctx: WorkloadContext, reporter: Reporter, body: dict[str, Any], *, known_absent: bool
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
            if _made_by(existing, reporter):
                return
            ctx.kube.delete_pod(namespace, name)
            wait_pod_gone(ctx.kube, reporter, namespace, name)
        try:
            ctx.kube.create_pod(body)
            return
        except KubernetesError as exc:
            if exc.status == 409:
                continue
            if exc.status == 403 and "quota" in exc.message.lower():
                # A create sent again after its answer was lost (a timeout) is refused as over
                # quota, the pod it made counted: that pod is this operation's to adopt.
                existing = ctx.kube.read_pod(namespace, name)
                if existing is not None and _made_by(existing, reporter):
                    return
                raise StepFailed(
                    f"Kubernetes refused the lab: {exc.message}", FailureReason.QUOTA
                ) from None
            raise

"""Remote kernels as a kind of workload: a pod running ipykernel beside its user's lab.

A spawn sets the lab namespace's quota to hold the kernel, creates the kernel's Secret (its
connection key, which travels with the operation as its secret and is never part of its
spec) and the policy that admits only the lab's namespace, then the pod, and follows the pod
until the kernel's heartbeat port answers, failing fast as a lab does (an image that cannot
be pulled, no node that fits, a kernel that crashes before it listens). A delete removes the
pod with the grace the request gave and the Secret, waits until the pod is gone, and lowers
the quota again.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from app.builders import names
from app.concurrency import concurrently
from app.engine.feeds import WatchFeed
from app.engine.following import PodToFollow, follow_until_ready
from app.engine.kind import Finished, Run, StepFailed
from app.engine.reporter import HandedOver
from app.engine.waiting import wait_pod_gone
from app.models.identity import user_from_json, user_to_json
from app.models.workload import WorkloadStatus
from app.storage.kubernetes import KubernetesError
from app.workloads.holdings import holdings_of
from app.workloads.kernel.builders import (
    build_kernel_pod,
    build_kernel_secret,
    build_kernels_network_policy,
)
from app.workloads.kernel.models import DEFAULT_GRACE_SECONDS, KernelSpec
from app.workloads.kernel.quota import KERNEL_BUDGET
from app.workloads.kernel.records import (
    LAB_POD_ANNOTATION,
    RECORD_ANNOTATION,
    kernel_json,
    parse_kernel,
)
from app.workloads.kernel.tracking import KERNEL_SELECTOR, KernelTracking
from app.workloads.kind import ServiceKind
from app.workloads.quota import sync_lab_quota
from app.workloads.refs import KERNEL_KIND
from app.workloads.sizes import pod_size

OPERATION_ANNOTATION = "lab-spawner.jupyter.org/operation"
"""Which operation created a kernel pod, so a resumed spawn adopts its own pod."""


def spec_to_json(spec: KernelSpec) -> dict[str, Any]:
    """What a kernel's spawn operation carries: everything but the key."""
    return {
        "kernel_id": spec.kernel_id,
        "user": user_to_json(spec.user),
        "image": spec.image,
        "size": spec.size.name,
        "env": spec.env,
    }


class KernelKind(ServiceKind):
    """A user's remote kernel, named ``owner/kernel_id`` in the engine."""

    name = KERNEL_KIND
    admitted = True
    tracked_by = KernelTracking
    budget = KERNEL_BUDGET

    def spawn(self, run: Run) -> Finished:
        assert run.operation.spec is not None
        spec = self._spec(run.operation.spec)
        if run.secret is None:
            raise StepFailed("the kernel's key expired before it could be used")
        ctx, reporter = self._ctx, run.reporter
        namespace = names.lab_namespace(ctx.config.namespace_prefix, spec.username)
        pod_name = names.kernel_name(spec.kernel_id)
        # The quota first, so that Kubernetes admits the pod; the lab pod, whose run the
        # kernel belongs to, beside it.
        synced, lab_pod = concurrently(
            lambda: sync_lab_quota(ctx, holdings_of(ctx, run.workloads.records, spec.username)),
            lambda: ctx.kube.read_pod(
                namespace, names.object_name(spec.username, names.LAB_SUFFIX)
            ),
        )
        if not synced or lab_pod is None:
            raise StepFailed(f"user {spec.username} has no lab to run the kernel beside")
        reporter.info(f"Starting kernel {spec.kernel_id} ({spec.size.name})", progress=10)
        record = run.workloads.current()
        if record is None:
            raise StepFailed("the kernel's record is gone")
        policy = build_kernels_network_policy(spec.username, ctx.config, namespace)
        concurrently(
            functools.partial(
                ctx.kube.apply, "secrets", build_kernel_secret(spec, namespace, key=run.secret)
            ),
            lambda: ctx.kube.apply("networkpolicies", policy) if policy else None,
        )
        pod = build_kernel_pod(spec, ctx.config, namespace)
        pod["metadata"]["annotations"].update(
            {
                OPERATION_ANNOTATION: run.operation.id,
                RECORD_ANNOTATION: record,
                LAB_POD_ANNOTATION: str(lab_pod["metadata"].get("uid") or ""),
            }
        )
        try:
            # Subscribed before the create, whose answer is the first look at the pod.
            with self._pods().follow(namespace, pod_name) as follower:
                first_look = self._create_pod(run, pod)
                with run.waiting():
                    follow_until_ready(
                        ctx.kube,
                        reporter,
                        PodToFollow(namespace, pod_name, noun="kernel"),
                        first_look,
                        follower,
                    )
        except HandedOver:
            raise  # Another worker resumes the spawn and adopts the pod.
        except Exception:
            # A kernel that cannot come up holds nothing: its record says why, and its pod
            # (pending, or pulling in vain) would otherwise keep its place in the quota.
            self._remove(namespace, pod_name, grace_seconds=0)
            raise
        running = ctx.kube.read_pod(namespace, pod_name) or {}
        ip = (running.get("status") or {}).get("podIP")
        current = run.workloads.current() or record
        done = replace(parse_kernel(current), status=WorkloadStatus.RUNNING, ip=ip, error=None)
        run.reporter.closing("The kernel is running")
        return Finished(kernel_json(done))

    def _spec(self, data: dict[str, Any]) -> KernelSpec:
        size = pod_size(self._ctx.config, str(data["size"]))
        if size is None:
            raise StepFailed(f"the chosen size {data['size']} is no longer configured")
        return KernelSpec(
            kernel_id=str(data["kernel_id"]),
            user=user_from_json(data["user"]),
            image=str(data["image"]),
            size=size,
            env=dict(data.get("env") or {}),
        )

    def _create_pod(self, run: Run, body: dict[str, Any]) -> dict[str, Any] | None:
        """Create the kernel's pod, or adopt the one this operation made before a worker
        died; the pod as first seen."""
        kube = self._ctx.kube
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            return kube.create_pod(body)
        except KubernetesError as exc:
            refused = exc.status == 403 and "quota" in exc.message.lower()
            if exc.status != 409 and not refused:
                raise
            # A create sent again after its answer was lost finds its own pod: as a
            # duplicate, or (the quota admits before the name is checked) as over quota.
            existing = kube.read_pod(namespace, name)
            annotations = ((existing or {}).get("metadata") or {}).get("annotations") or {}
            if annotations.get(OPERATION_ANNOTATION) == run.operation.id:
                return existing
            if refused:
                raise StepFailed(f"Kubernetes refused the kernel: {exc.message}") from None
            raise StepFailed(f"pod {name} exists and is not this kernel's") from None

    def delete(self, run: Run) -> Finished:
        owner, _, kernel_id = run.operation.ref.name.partition("/")
        ctx = self._ctx
        current = run.workloads.current()
        if current is None:
            return Finished(None)
        record = parse_kernel(current)
        name = names.kernel_name(kernel_id)
        grace = int((run.operation.spec or {}).get("grace_seconds", DEFAULT_GRACE_SECONDS))
        self._remove(record.namespace, name, grace_seconds=grace)
        run.reporter.info(f"Stopping kernel {kernel_id}")
        with self._pods().follow(record.namespace, name) as follower, run.waiting():
            wait_pod_gone(ctx.kube, run.reporter, record.namespace, name, follower)
        holdings = holdings_of(ctx, run.workloads.records, owner)
        sync_lab_quota(ctx, holdings.without(KERNEL_KIND, run.operation.ref.name))
        run.reporter.closing(f"Kernel {kernel_id} of {owner} deleted")
        return Finished(None)

    def _pods(self) -> WatchFeed:
        """The runner's one watch of kernel pods, which spawns and deletes wait on."""
        return self._ctx.feeds.feed("pods", KERNEL_SELECTOR)

    def _remove(self, namespace: str, name: str, *, grace_seconds: int) -> None:
        """Delete the kernel's pod (given ``grace_seconds``) and its Secret."""
        kube = self._ctx.kube
        concurrently(
            lambda: kube.delete_pod_with_grace(namespace, name, grace_seconds=grace_seconds),
            lambda: kube.delete_secret(namespace, name),
        )

    def failed_record(self, run: Run, message: str) -> str | None:
        current = run.workloads.current()
        if current is None:
            return None
        failed = replace(parse_kernel(current), status=WorkloadStatus.FAILED, error=message)
        return kernel_json(failed)

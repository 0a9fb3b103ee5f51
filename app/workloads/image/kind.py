"""Image validation as a kind of workload: a digest tried in pods of its own before it is
offered to anyone.

A spawn of an image validates it. With its source trusted (no validation configured), the
digest is validated at once. Otherwise it moves to ``pulling`` and gets one validation pod
on each of the nodes it needs (a node that holds the image already first); once a pod's
container runs it is ``validating``; once every pod has ended, it is ``validated`` if the
command exited 0 on every node, else ``rejected`` with the reason and the tail of the failing
pod's log. An image that cannot be pulled, or a command that outlives its timeout, is
rejected at once, without waiting for the others. The pods are deleted in every case.

Being an operation of the engine, a validation is run by one worker at a time under a
lease, and resumed by another worker from the pods it finds (named after the digest) when
its worker dies.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from app.builders.validation import (
    CONTAINER,
    DIGEST_ANNOTATION,
    OPERATION_ANNOTATION,
    VALIDATION_SELECTOR,
    build_validation_pod,
    validation_pod_name,
)
from app.concurrency import concurrently
from app.engine.kind import Finished, Run, StepFailed
from app.engine.pods import judge
from app.engine.waiting import await_pods_change
from app.models.config import ImageValidation, PrepullConfig
from app.models.workload import Action
from app.storage.kubernetes import KubernetesError
from app.timestamps import iso_utc
from app.workloads.context import WorkloadContext
from app.workloads.image.lifecycle import ImageLifecycle
from app.workloads.image.models import (
    UNDER_TEST,
    ImageRecord,
    ImageState,
    ValidationResult,
)
from app.workloads.image.placement import read_node
from app.workloads.image.records import image_json, parse_image
from app.workloads.image.tracking import ValidationTracking
from app.workloads.kind import ServiceKind
from app.workloads.refs import IMAGE_KIND
from app.workloads.sizes import pod_size

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 20
PULL_ALLOWANCE_SECONDS = 600.0
"""Besides the validation's own timeout, what its pods may take to pull the image."""


def now() -> str:
    return iso_utc(time.time()) or ""


class ImageKind(ServiceKind):
    """A digest on its way into service, named by the digest in the engine."""

    name = IMAGE_KIND

    def track(self, ctx: WorkloadContext) -> ValidationTracking:
        return ValidationTracking()

    def timeout(self, action: Action) -> float:
        if action is not Action.SPAWN:
            return self._ctx.config.lab.delete_timeout
        longest = max(
            (b.validation.timeout for b in self._ctx.config.prepull if b.validation), default=0.0
        )
        return longest + PULL_ALLOWANCE_SECONDS

    # Validate ----------------------------------------------------------------------------

    def spawn(self, run: Run) -> Finished:
        current = run.workloads.current()
        if current is None:
            raise StepFailed("the image's record is gone")
        record = parse_image(current)
        block = self._block(record.source)
        by = f"validation {run.operation.id}"
        if block is None:
            raise StepFailed(f"its source {record.source} is no longer configured")
        if block.validation is None:
            done = record.moved(
                ImageState.VALIDATED, at=now(), by=by, why=f"source {block.name} is trusted"
            )
            self._publish(run, image_json(done), record.source)
            run.reporter.closing("Trusted: validated")
            return Finished(image_json(done))
        validation = block.validation
        size = pod_size(self._ctx.config, validation.size)
        if size is None:
            raise StepFailed(f"the validation's size {validation.size} is not configured")
        nodes = self._nodes(record, validation.nodes)
        # A run resumed after its worker died goes on from where that worker got.
        resumed = record.state in UNDER_TEST and record.history[-1].by == by
        pulling = record
        if not resumed:
            pulling = record.moved(
                ImageState.PULLING, at=now(), by=by, why=f"validation pods on {', '.join(nodes)}"
            )
            run.workloads.keep(image_json(pulling))
            logger.info("image %s is pulling on %s", record.digest, ", ".join(nodes))
        run.reporter.info(f"Validating {record.digest} on {', '.join(nodes)}", progress=10)
        started = time.monotonic()
        pods = [
            build_validation_pod(
                self._ctx.config,
                reference=record.references[0],
                digest=record.digest,
                validation=validation,
                size=size,
                node=node,
                index=index,
                operation_id=run.operation.id,
            )
            for index, node in enumerate(nodes)
        ]
        try:
            for pod in pods:
                self._create(pod, run)
            with run.waiting():
                result = self._follow(run, pulling, validation, nodes, started)
        finally:
            self._remove(record.digest, len(nodes))
        latest = parse_image(run.workloads.current() or current)
        # The record as this validation last wrote it (validating, if the command ran).
        base = latest if latest.state in (ImageState.PULLING, ImageState.VALIDATING) else pulling
        state = ImageState.VALIDATED if result.passed else ImageState.REJECTED
        why = "passed on every node" if result.passed else result.reason
        done = base.moved(state, at=now(), by=by, why=why)
        finished = image_json(replace(done, validation=result))
        logger.info("image %s is %s: %s", record.digest, state.value, why)
        self._publish(run, finished, record.source)
        run.reporter.closing(f"The image is {state.value}")
        return Finished(finished)

    def _publish(self, run: Run, record: str, source: str) -> None:
        """Record the outcome, then offer the source's images as it decides: users get a
        validated image as soon as it passed, not at the next refresh."""
        ctx = self._ctx
        if run.workloads.keep(record):
            ImageLifecycle(ctx.config, run.workloads, ctx.image_store, None).publish(source)

    def _block(self, source: str) -> PrepullConfig | None:
        return next((b for b in self._ctx.config.prepull if b.name == source), None)

    def _nodes(self, record: ImageRecord, count: int) -> list[str]:
        """``count`` nodes labs may run on, those that hold the image already first."""
        lab = self._ctx.config.lab
        nodes = [
            read_node(node, lab.node_selector, lab.tolerations)
            for node in self._ctx.kube.list_nodes()
        ]
        eligible = [n for n in nodes if n.eligible]
        eligible.sort(key=lambda n: (record.digest not in n.digests, n.name))
        if len(eligible) < count:
            raise StepFailed(
                f"the validation needs {count} nodes labs may run on; there are {len(eligible)}"
            )
        return [n.name for n in eligible[:count]]

    def _create(self, pod: dict[str, Any], run: Run) -> None:
        """Create a validation pod, or keep the one this operation made before."""
        kube = self._ctx.kube
        meta = pod["metadata"]
        try:
            kube.create_pod(pod)
            return
        except KubernetesError as exc:
            if exc.status != 409:
                raise
        existing = kube.read_pod(meta["namespace"], meta["name"]) or {}
        annotations = (existing.get("metadata") or {}).get("annotations") or {}
        if annotations.get(OPERATION_ANNOTATION) == run.operation.id:
            return
        # Left by a validation that ended without removing it: it is not this one's.
        kube.delete_pod_with_grace(meta["namespace"], meta["name"], grace_seconds=0)
        raise StepFailed(f"an earlier validation's pod {meta['name']} was still there")

    def _follow(
        self,
        run: Run,
        pulling: ImageRecord,
        validation: ImageValidation,
        nodes: list[str],
        started: float,
    ) -> ValidationResult:
        """Until every pod has ended, or one has failed for good."""
        kube = self._ctx.kube
        namespace = self._ctx.config.kubernetes.service_namespace
        names = {validation_pod_name(pulling.digest, i) for i in range(len(nodes))}
        validating = pulling.state is ImageState.VALIDATING  # a resumed run's
        while True:
            run.reporter.check()
            listed, version = kube.list_pods_at(namespace, VALIDATION_SELECTOR)
            pods = {
                p["metadata"]["name"]: p
                for p in listed
                if p["metadata"]["name"] in names
                and (p["metadata"].get("annotations") or {}).get(DIGEST_ANNOTATION)
                == pulling.digest
            }
            seconds = round(time.monotonic() - started, 3)
            missing = sorted(names - pods.keys())
            if missing:
                raise StepFailed(f"validation pod {missing[0]} was deleted while it ran")
            # Before any verdict: a command that ran and failed between two looks still ran,
            # and the record's history says so.
            if not validating and any(_started(p) for p in pods.values()):
                validating = True
                moved = pulling.moved(
                    ImageState.VALIDATING,
                    at=now(),
                    by=f"validation {run.operation.id}",
                    why=f"running {' '.join(validation.command)}",
                )
                run.workloads.keep(image_json(moved))
                logger.info("image %s is validating", pulling.digest)
                run.reporter.info("The validation runs", progress=50)
            for name in sorted(names):
                failure = _failure(pods[name], validation)
                if failure is not None:
                    return self._rejected(pods[name], failure, nodes, seconds)
            ended = [_exit_code(pods[name]) for name in sorted(names)]
            if all(code is not None for code in ended):
                return ValidationResult(passed=True, nodes=nodes, seconds=seconds, exit_code=0)
            await_pods_change(self._ctx.kube, run.reporter, namespace, VALIDATION_SELECTOR, version)

    def _rejected(
        self, pod: dict[str, Any], failure: tuple[str, int | None], nodes: list[str], seconds: float
    ) -> ValidationResult:
        reason, code = failure
        meta = pod["metadata"]
        log = self._ctx.kube.read_pod_log(
            meta["namespace"], meta["name"], tail_lines=LOG_TAIL_LINES
        )
        node = (pod.get("spec") or {}).get("nodeName") or "?"
        return ValidationResult(
            passed=False,
            nodes=nodes,
            seconds=seconds,
            reason=f"{reason} (on {node})",
            exit_code=code,
            log_tail=(log or "").splitlines()[-LOG_TAIL_LINES:],
        )

    def _remove(self, digest: str, count: int) -> None:
        namespace = self._ctx.config.kubernetes.service_namespace
        kube = self._ctx.kube
        concurrently(
            *(
                lambda i=i: kube.delete_pod_with_grace(
                    namespace, validation_pod_name(digest, i), grace_seconds=0
                )
                for i in range(count)
            )
        )

    # The rest ----------------------------------------------------------------------------

    def delete(self, run: Run) -> Finished:
        """Forget the digest (its pods, if a validation left any, go with it)."""
        current = run.workloads.current()
        if current is not None:
            record = parse_image(current)
            block = self._block(record.source)
            count = block.validation.nodes if block and block.validation else 0
            self._remove(record.digest, count)
        return Finished(None)

    def failed_record(self, run: Run, message: str) -> str | None:
        """A validation that could not run (no nodes, its deadline) leaves the digest
        discovered, to be tried again; it says why."""
        current = run.workloads.current()
        if current is None:
            return None
        record = parse_image(current)
        if run.operation.action is Action.DELETE:
            return current
        back = record.moved(
            ImageState.DISCOVERED,
            at=now(),
            by=f"validation {run.operation.id}",
            why=f"not validated: {message}",
        )
        return image_json(back)


def _state(pod: dict[str, Any]) -> dict[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER:
            return dict(status.get("state") or {})
    return {}


def _started(pod: dict[str, Any]) -> bool:
    state = _state(pod)
    return "running" in state or "terminated" in state


def _exit_code(pod: dict[str, Any]) -> int | None:
    terminated = _state(pod).get("terminated") or {}
    code = terminated.get("exitCode")
    return int(code) if code is not None and int(code) == 0 else None


def _failure(pod: dict[str, Any], validation: ImageValidation) -> tuple[str, int | None] | None:
    """Why the pod shows the image fails, and the command's exit code if it ran; None while
    it may still pass."""
    status = pod.get("status") or {}
    if status.get("reason") == "DeadlineExceeded":
        return f"did not finish in {validation.timeout:g} s", None
    terminated = _state(pod).get("terminated") or {}
    code = terminated.get("exitCode")
    if code is not None and int(code) != 0:
        reason = terminated.get("reason") or "Error"
        return f"the command exited with {code} ({reason})", int(code)
    if code is not None:
        return None
    verdict = judge(pod, noun="validation")
    if verdict.failure:
        return verdict.failure, None
    return None

"""Kernel records as the engine stores them, and from what Kubernetes holds.

A record is stored as its schema (``KernelSchema``, the routes' body) dumps it. The service
writes a kernel's record when it is asked for the kernel; the pod carries what
the record needs besides its state (an annotation with the size, image, creation time and
usage), so a record Redis lost is made again from the pod alone. The state follows from the
pod: ready is running, ended is exited (with the container's exit code).
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from app.builders import names
from app.models.workload import WorkloadStatus
from app.schemas.records import RecordText
from app.workloads.kernel.models import KernelRecord, KernelSpec, kernel_size_usage
from app.workloads.kernel.schemas import KernelSchema

RECORD_ANNOTATION = "lab-spawner.jupyter.org/kernel-record"
"""On a kernel's pod: JSON of its record as created (starting, no address)."""
LAB_POD_ANNOTATION = "lab-spawner.jupyter.org/lab-pod-uid"
"""On a kernel's pod: the uid of the lab pod it was started for. A kernel belongs to one run
of its lab; once that lab pod is gone, so is whoever used the kernel."""

KERNEL_TEXT = RecordText(KernelRecord, KernelSchema)
"""A kernel's record as the engine stores it (and its pod's ``RECORD_ANNOTATION`` keeps)."""
kernel_json = KERNEL_TEXT.dump
parse_kernel = KERNEL_TEXT.parse


def new_record(spec: KernelSpec, namespace: str, created: str) -> KernelRecord:
    return KernelRecord(
        kernel_id=spec.kernel_id,
        owner=spec.username,
        namespace=namespace,
        status=WorkloadStatus.STARTING,
        size=spec.size.name,
        image=spec.image,
        created=created,
        usage=asdict(kernel_size_usage(spec.size)),
    )


def exit_code(pod: dict[str, Any]) -> int | None:
    """The kernel container's exit code once its pod has ended; None while it has not."""
    status = pod.get("status") or {}
    if status.get("phase") not in ("Succeeded", "Failed"):
        return None
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        if "exitCode" in terminated:
            return int(terminated["exitCode"])
    return 0 if status.get("phase") == "Succeeded" else 1


def exit_reason(pod: dict[str, Any]) -> str | None:
    """Why a kernel that ended with a failure did (OOMKilled, Error, an eviction)."""
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        if terminated.get("exitCode"):
            return str(terminated.get("reason") or "Error")
    return status.get("reason") if status.get("phase") == "Failed" else None


def exited(record: KernelRecord, pod: dict[str, Any]) -> KernelRecord | None:
    """The record of a kernel whose pod ended; None while it has not."""
    code = exit_code(pod)
    if code is None:
        return None
    return replace(record, status=WorkloadStatus.EXITED, exit_code=code, error=exit_reason(pod))


def record_from_pod(pod: dict[str, Any], *, ready: bool) -> str | None:
    """The record of the kernel ``pod`` runs; None when the pod does not say."""
    meta = pod.get("metadata") or {}
    try:
        record = parse_kernel((meta.get("annotations") or {}).get(RECORD_ANNOTATION) or "")
    except ValueError:
        return None
    labels = meta.get("labels") or {}
    if labels.get(names.KERNEL_LABEL) != record.kernel_id:
        return None
    ended = exited(record, pod)
    if ended is not None:
        return kernel_json(ended)
    if ready:
        ip = (pod.get("status") or {}).get("podIP")
        return kernel_json(replace(record, status=WorkloadStatus.RUNNING, ip=ip))
    return kernel_json(record)

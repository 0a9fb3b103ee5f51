"""How kernel records follow Kubernetes between operations (see ``app.engine.tracking``).

A kernel is one pod. Ready, it is running; ended (``restartPolicy: Never``), it exited,
with its exit code; gone without the service deleting it (by hand, or with the lab's
namespace), its record says it failed, and why. A record Redis lost is made again from its
pod (``records.record_from_pod``). A kernel pod whose lab pod is gone, or is another run of
the lab than the one it was started for, has no one to use it: the reconcile deletes it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.builders import names
from app.engine.pods import judge
from app.models.workload import WorkloadStatus
from app.workloads.beside_lab import BesideLabTracking
from app.workloads.kernel.records import (
    LAB_POD_ANNOTATION,
    exited,
    kernel_json,
    parse_kernel,
    record_from_pod,
)

KERNEL_SELECTOR = (
    f"{names.COMPONENT_LABEL}={names.KERNEL_COMPONENT},{names.KERNEL_LABEL},{names.USER_LABEL}"
)
"""Every kernel pod of the service, in any namespace."""

GONE_ERROR = "the kernel's pod is gone (deleted outside the service, or with its lab)"


class KernelTracking(BesideLabTracking):
    """A kernel is followed through its pod (``owner/kernel_id``)."""

    selector = KERNEL_SELECTOR
    owner_label = names.USER_LABEL
    name_label = names.KERNEL_LABEL

    def assess(self, record: str, pod: dict[str, Any] | None) -> str | None:
        current = parse_kernel(record)
        if current.status not in (WorkloadStatus.STARTING, WorkloadStatus.RUNNING):
            return None
        if pod is None:
            return kernel_json(replace(current, status=WorkloadStatus.FAILED, error=GONE_ERROR))
        ended = exited(current, pod)
        if ended is not None:
            return kernel_json(ended)
        if current.status is WorkloadStatus.STARTING and judge(pod, "kernel").ready:
            ip = (pod.get("status") or {}).get("podIP")
            return kernel_json(replace(current, status=WorkloadStatus.RUNNING, ip=ip))
        return None

    def rebuild(self, pod: dict[str, Any]) -> str | None:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            return None
        return record_from_pod(pod, ready=judge(pod, "kernel").ready)

    def orphaned(self, pod: dict[str, Any]) -> bool:
        """Whether the lab pod the kernel was started for is gone."""
        meta = pod.get("metadata") or {}
        wanted = (meta.get("annotations") or {}).get(LAB_POD_ANNOTATION)
        owner = (meta.get("labels") or {}).get(names.USER_LABEL)
        if not wanted or not owner:
            return False
        lab = self._kube.read_pod(
            str(meta.get("namespace")), names.object_name(owner, names.LAB_SUFFIX)
        )
        return lab is None or (lab.get("metadata") or {}).get("uid") != wanted

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
from app.engine.tracking import PodTracking
from app.models.config import Config
from app.storage.kubernetes import KubernetesStorage
from app.workloads.kernel.models import KernelStatus, kernel_json, parse_kernel
from app.workloads.kernel.records import LAB_POD_ANNOTATION, exited, record_from_pod

KERNEL_SELECTOR = (
    f"{names.COMPONENT_LABEL}={names.KERNEL_COMPONENT},{names.KERNEL_LABEL},{names.USER_LABEL}"
)
"""Every kernel pod of the service, in any namespace."""

GONE_ERROR = "the kernel's pod is gone (deleted outside the service, or with its lab)"


class KernelTracking(PodTracking):
    selector = KERNEL_SELECTOR

    def __init__(self, config: Config, kube: KubernetesStorage) -> None:
        self._config = config
        self._kube = kube

    def owner(self, obj: dict[str, Any]) -> str | None:
        """``owner/kernel_id`` of a kernel pod in its owner's lab namespace."""
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        owner, kernel_id = labels.get(names.USER_LABEL), labels.get(names.KERNEL_LABEL)
        if not owner or not kernel_id:
            return None
        if meta.get("namespace") != names.lab_namespace(self._config.namespace_prefix, owner):
            return None
        return f"{owner}/{kernel_id}"

    def assess(self, record: str, pod: dict[str, Any] | None) -> str | None:
        current = parse_kernel(record)
        if current.status not in (KernelStatus.STARTING, KernelStatus.RUNNING):
            return None
        if pod is None:
            return kernel_json(replace(current, status=KernelStatus.FAILED, error=GONE_ERROR))
        ended = exited(current, pod)
        if ended is not None:
            return kernel_json(ended)
        if current.status is KernelStatus.STARTING and judge(pod, "kernel").ready:
            ip = (pod.get("status") or {}).get("podIP")
            return kernel_json(replace(current, status=KernelStatus.RUNNING, ip=ip))
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

"""The dask-kubernetes operator, for ``DaskCluster`` (``kubernetes.dask.org/v1``).

For a DaskCluster N in namespace X the real operator creates a scheduler Deployment
``N-scheduler`` (labels ``dask.org/cluster-name=N``, ``dask.org/component=scheduler``), the
Service ``N-scheduler`` from ``spec.scheduler.service`` as given, and a DaskWorkerGroup
``N-default`` whose controller runs one Deployment per worker, ``N-default-worker-<10 hex>``
(labels ``dask.org/workergroup-name=N-default``, ``dask.org/component=worker``), each worker
told ``DASK_WORKER_NAME`` (its Deployment's name) and ``DASK_SCHEDULER_ADDRESS``. The phase goes
``Created``, ``Pending``, then ``Running`` once the scheduler's Service exists.

Here the simulation plays the operator and the Deployments behind it: pods are named as those
Deployments' pods are (``<deployment>-<hash>-<suffix>``), a deleted one is made again under the
same Deployment, and the worker group is internal rather than an object of its own. The
scheduler address is the Service's cluster IP when it has a loopback one (the local stack has
no cluster DNS), its DNS name otherwise.
"""

from __future__ import annotations

from typing import Any

from ..cache import Obj
from ..daemonsets import random_suffix
from .base import (
    Member,
    OperatorSimulation,
    hex_id,
    member_keys,
    pod_spec_with_env,
)

CLUSTER_LABEL = "dask.org/cluster-name"
COMPONENT_LABEL = "dask.org/component"
WORKERGROUP_LABEL = "dask.org/workergroup-name"
SCHEDULER_PORT = 8786


class DaskOperator(OperatorSimulation):
    plural = "daskclusters"
    group = "kubernetes.dask.org"
    version = "v1"
    kind = "DaskCluster"
    owner_label = CLUSTER_LABEL

    def members(self, obj: Obj, current: list[Obj]) -> list[Member]:
        name = str(obj["metadata"]["name"])
        spec = obj.get("spec") or {}
        scheduler = spec.get("scheduler") or {}
        worker = spec.get("worker") or {}
        scheduler_labels = {
            **((scheduler.get("metadata") or {}).get("labels") or {}),
            CLUSTER_LABEL: name,
            COMPONENT_LABEL: "scheduler",
            "sidecar.istio.io/inject": "false",
        }
        members = [
            Member(
                key=f"{name}-scheduler",
                name=_deployment_pod_name(f"{name}-scheduler"),
                labels=scheduler_labels,
                spec=dict(scheduler.get("spec") or {}),
            )
        ]
        group = f"{name}-default"
        workers = [
            key for key in dict.fromkeys(member_keys(current)) if key.startswith(f"{group}-worker-")
        ]
        replicas = max(0, int(worker.get("replicas") or 0))
        while len(workers) < replicas:
            workers.append(f"{group}-worker-{hex_id()}")
        # Scaling down retires the workers listed last.
        for deployment in workers[:replicas]:
            members.append(self._worker(obj, group, deployment))
        return members

    def _worker(self, obj: Obj, group: str, deployment: str) -> Member:
        name = str(obj["metadata"]["name"])
        worker = (obj.get("spec") or {}).get("worker") or {}
        labels = {
            **((worker.get("metadata") or {}).get("labels") or {}),
            CLUSTER_LABEL: name,
            WORKERGROUP_LABEL: group,
            COMPONENT_LABEL: "worker",
            "sidecar.istio.io/inject": "false",
        }
        env = {
            "DASK_WORKER_NAME": deployment,
            "DASK_SCHEDULER_ADDRESS": self._scheduler_address(obj),
        }
        spec = pod_spec_with_env(dict(worker.get("spec") or {}), env)
        return Member(deployment, _deployment_pod_name(deployment), labels, spec)

    def _scheduler_address(self, obj: Obj) -> str:
        meta = obj["metadata"]
        service = self._writer.store.get(
            "services", meta.get("namespace"), f"{meta['name']}-scheduler"
        )
        address = str(((service or {}).get("spec") or {}).get("clusterIP") or "")
        if address.startswith("127."):
            return f"tcp://{address}:{SCHEDULER_PORT}"
        return f"tcp://{meta['name']}-scheduler.{meta.get('namespace')}.svc.cluster.local:{SCHEDULER_PORT}"

    def services(self, obj: Obj) -> list[dict[str, Any]]:
        name = str(obj["metadata"]["name"])
        spec = dict(((obj.get("spec") or {}).get("scheduler") or {}).get("service") or {})
        labels = {CLUSTER_LABEL: name, COMPONENT_LABEL: "scheduler"}
        return [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": f"{name}-scheduler", "labels": labels},
                "spec": spec,
            }
        ]

    def status(self, obj: Obj, pods: list[Obj], services: list[Obj]) -> dict[str, Any]:
        workers = [
            p for p in pods if (p["metadata"].get("labels") or {}).get(COMPONENT_LABEL) == "worker"
        ]
        phase = "Running" if services else "Pending"
        return {"phase": phase, "replicas": len(workers)}

    def reconcile(self, namespace: str, name: str) -> None:
        # The scheduler's Service first, so that workers are told its address.
        obj = self._get(namespace, name)
        if obj is None:
            return
        if not (obj.get("status") or {}).get("phase"):
            self._write_status(obj, {"phase": "Created"})
        super().reconcile(namespace, name)


def _deployment_pod_name(deployment: str) -> Any:
    template_hash = random_suffix(10)
    return lambda: f"{deployment}-{template_hash}-{random_suffix()}"

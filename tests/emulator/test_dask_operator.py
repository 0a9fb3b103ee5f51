"""The real dask-kubernetes operator against the emulator, its pods real Dask processes: the
objects it makes (named, labelled and owned as it makes them), workers that find the scheduler
by its Service's cluster DNS name, a scale both ways (down by retiring workers through the
scheduler), a deleted scheduler made again by its Deployment, and a deletion that the
operator's finalizer holds and the garbage collector completes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import distributed
import kubernetes.client
import pytest

from devstack.kube import KubernetesEmulator
from devstack.kube.cluster.programs import ImageProgram
from tests.emulator.conftest import WaitUntil
from tests.support.dask_operator import dask_operator_for

DASK_IMAGE = "ghcr.io/dask/dask:2026.8.0"
GROUP, VERSION = "kubernetes.dask.org", "v1"


def _dask_cluster(name: str, workers: int) -> dict[str, Any]:
    scheduler_args = ["dask", "scheduler", "--host", "$(POD_IP)"]
    scheduler_args += ["--dashboard-address", "$(POD_IP):8787"]
    worker_args = ["dask", "worker", "--name", "$(DASK_WORKER_NAME)", "--host", "$(POD_IP)"]
    worker_args += ["--nthreads", "1", "--no-dashboard"]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DaskCluster",
        "metadata": {"name": name},
        "spec": {
            "worker": {
                "replicas": workers,
                "spec": {
                    "containers": [{"name": "worker", "image": DASK_IMAGE, "args": worker_args}]
                },
            },
            "scheduler": {
                "spec": {
                    "containers": [
                        {
                            "name": "scheduler",
                            "image": DASK_IMAGE,
                            "args": scheduler_args,
                            "ports": [
                                {"name": "tcp-comm", "containerPort": 8786},
                                {"name": "http-dashboard", "containerPort": 8787},
                            ],
                            "readinessProbe": {
                                "tcpSocket": {"port": "tcp-comm"},
                                "periodSeconds": 1,
                            },
                        }
                    ]
                },
                "service": {
                    "type": "ClusterIP",
                    "selector": {"dask.org/cluster-name": name, "dask.org/component": "scheduler"},
                    # The operator retires workers through the dashboard's port, by its name.
                    "ports": [
                        {"name": "tcp-comm", "port": 8786, "targetPort": "tcp-comm"},
                        {"name": "http-dashboard", "port": 8787, "targetPort": "http-dashboard"},
                    ],
                },
            },
        },
    }


def _pods(core_v1: kubernetes.client.CoreV1Api, namespace: str, selector: str) -> list[Any]:
    pods = core_v1.list_namespaced_pod(namespace, label_selector=selector).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def _owner(obj: Any) -> tuple[str, str]:
    (reference,) = obj.metadata.owner_references
    return reference.kind, reference.name


@pytest.mark.cluster_settings(programs={"*/dask/dask": ImageProgram()})
def test_the_operator_makes_scales_remakes_and_deletes_a_cluster_of_real_processes(
    emulator: KubernetesEmulator,
    objects: kubernetes.client.CustomObjectsApi,
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
    tmp_path: Path,
) -> None:
    emulator.cluster.add_node("node-1")
    with dask_operator_for(emulator, tmp_path):
        objects.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "daskclusters", _dask_cluster("dk", 2)
        )

        def phase() -> str:
            found = objects.get_namespaced_custom_object(
                GROUP, VERSION, namespace, "daskclusters", "dk"
            )
            return str((found.get("status") or {}).get("phase"))

        wait_until(lambda: phase() == "Running", timeout=30)
        cluster = objects.get_namespaced_custom_object(
            GROUP, VERSION, namespace, "daskclusters", "dk"
        )
        # kopf holds the object with its finalizer while it runs handlers for it.
        assert cluster["metadata"]["finalizers"] == ["kopf.zalando.org/KopfFinalizerMarker"]
        scheduler = apps_v1.read_namespaced_deployment("dk-scheduler", namespace)
        assert _owner(scheduler) == ("DaskCluster", "dk")
        assert _owner(core_v1.read_namespaced_service("dk-scheduler", namespace)) == (
            "DaskCluster",
            "dk",
        )

        def group_owners() -> list[dict[str, Any]]:
            try:
                group = objects.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, "daskworkergroups", "dk-default"
                )
            except kubernetes.client.ApiException as exc:
                if exc.status == 404:
                    return []
                raise
            return list(group["metadata"].get("ownerReferences") or [])

        # The operator makes the worker group after the Service (whose status handler may
        # already have said Running), and the group's own handler adopts it.
        assert wait_until(group_owners, timeout=30)[0]["kind"] == "DaskCluster"

        worker_selector = "dask.org/cluster-name=dk,dask.org/component=worker"
        wait_until(lambda: len(_pods(core_v1, namespace, worker_selector)) == 2, timeout=30)
        for worker in _pods(core_v1, namespace, worker_selector):
            env = {e.name: e.value for e in worker.spec.containers[0].env}
            assert env["DASK_SCHEDULER_ADDRESS"] == (
                f"tcp://dk-scheduler.{namespace}.svc.cluster.local:8786"
            )
            assert env["DASK_WORKER_NAME"].startswith("dk-default-worker-")
            deployment = apps_v1.read_namespaced_deployment(env["DASK_WORKER_NAME"], namespace)
            assert _owner(deployment) == ("DaskWorkerGroup", "dk-default")

        scheduler_selector = "dask.org/cluster-name=dk,dask.org/component=scheduler"

        def scheduler_ready() -> bool:
            pods = _pods(core_v1, namespace, scheduler_selector)
            conditions = (pods[0].status.conditions or []) if pods else []
            return any(c.type == "Ready" and c.status == "True" for c in conditions)

        wait_until(scheduler_ready, timeout=60)
        address = core_v1.read_namespaced_service("dk-scheduler", namespace).spec.cluster_ip
        with distributed.Client(f"tcp://{address}:8786", timeout=30) as client:
            # The workers found the scheduler by its DNS name, through the stack's cluster DNS.
            client.wait_for_workers(2, timeout=60)
            assert client.submit(sum, range(10)).result(timeout=30) == 45

            for replicas in (3, 1):
                objects.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    "daskclusters",
                    "dk",
                    {"spec": {"worker": {"replicas": replicas}}},
                )
                wait_until(
                    lambda r=replicas: len(client.scheduler_info()["workers"]) == r, timeout=60
                )
            wait_until(lambda: len(_pods(core_v1, namespace, worker_selector)) == 1, timeout=30)

        (first,) = _pods(core_v1, namespace, scheduler_selector)
        core_v1.delete_namespaced_pod(first.metadata.name, namespace)

        def remade() -> bool:
            now = _pods(core_v1, namespace, scheduler_selector)
            return len(now) == 1 and now[0].metadata.name != first.metadata.name

        wait_until(remade, timeout=30)

        objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, "daskclusters", "dk")

        def everything_gone() -> bool:
            left = [
                *apps_v1.list_namespaced_deployment(namespace).items,
                *core_v1.list_namespaced_service(namespace).items,
                *core_v1.list_namespaced_pod(namespace).items,
                *objects.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, "daskworkergroups"
                )["items"],
                *objects.list_namespaced_custom_object(GROUP, VERSION, namespace, "daskclusters")[
                    "items"
                ],
            ]
            return not left

        wait_until(everything_gone, timeout=60)

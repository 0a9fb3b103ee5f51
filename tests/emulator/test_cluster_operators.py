"""The simulated operators (KubeRay's and Spark's), through the real client: each turns its
custom object into the pods and Services its real operator makes (names and labels as the real
one's), keeps the workers at the requested count, makes a deleted head again, writes status,
and takes everything away with the object. With the process runtime, a Ray cluster runs real
Ray nodes. Dask's operator is the real one (``test_dask_operator``)."""

from __future__ import annotations

from typing import Any

import kubernetes.client
import pytest

from devstack.kube import KubernetesEmulator
from devstack.kube.cluster.programs import ImageProgram
from devstack.kube.crds import crd
from tests.emulator.conftest import WaitUntil
from tests.support.ray_driver import assert_a_task_ran_on_each, left_running, run_tasks


@pytest.fixture(autouse=True)
def node(emulator: KubernetesEmulator) -> None:
    """A node for the operators' pods to run on."""
    emulator.cluster.add_node("node-1")


def _install(
    extensions: kubernetes.client.ApiextensionsV1Api, wait_until: WaitUntil, plural: str
) -> None:
    body = crd(plural)
    extensions.create_custom_resource_definition(body)

    def established() -> bool:
        found = extensions.read_custom_resource_definition(body["metadata"]["name"])
        conditions = (found.status.conditions if found.status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_until(established)


def _pods(core_v1: kubernetes.client.CoreV1Api, namespace: str, selector: str) -> list[Any]:
    pods = core_v1.list_namespaced_pod(namespace, label_selector=selector).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def test_an_operators_pods_pass_the_namespaces_quota(
    extensions: kubernetes.client.ApiextensionsV1Api,
    objects: kubernetes.client.CustomObjectsApi,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """As from a real operator, pods go through the API server's quota admission: one the
    quota cannot take is not made, a FailedCreate Event on the object says why, and the next
    reconcile of the object makes it once the quota has room."""
    _install(extensions, wait_until, "rayclusters")
    quota = {"metadata": {"name": "room"}, "spec": {"hard": {"pods": "2"}}}
    core_v1.create_namespaced_resource_quota(namespace, quota)
    template = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.40.0"}]}}
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rq"},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": template},
            "workerGroupSpecs": [
                {"groupName": "cpu", "replicas": 2, "maxReplicas": 2, "template": template}
            ],
        },
    }
    objects.create_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters", body)
    everything = "ray.io/cluster=rq"

    def refused() -> list[Any]:
        events = core_v1.list_namespaced_event(namespace).items
        return [
            e
            for e in events
            if e.reason == "FailedCreate" and e.involved_object.kind == "RayCluster"
        ]

    wait_until(refused)
    for event in refused():
        assert event.type == "Warning" and event.involved_object.name == "rq"
        assert "exceeded quota: room" in event.message
    assert len(_pods(core_v1, namespace, everything)) == 2

    core_v1.patch_namespaced_resource_quota("room", namespace, {"spec": {"hard": {"pods": "3"}}})
    objects.patch_namespaced_custom_object(
        "ray.io", "v1", namespace, "rayclusters", "rq", {"metadata": {"labels": {"a": "b"}}}
    )
    wait_until(lambda: len(_pods(core_v1, namespace, everything)) == 3)


def test_a_ray_cluster_becomes_a_head_its_service_and_workers_within_bounds(
    extensions: kubernetes.client.ApiextensionsV1Api,
    objects: kubernetes.client.CustomObjectsApi,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    _install(extensions, wait_until, "rayclusters")
    template = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.40.0"}]}}
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc"},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": template},
            "workerGroupSpecs": [
                {
                    "groupName": "cpu",
                    "replicas": 5,
                    "minReplicas": 1,
                    "maxReplicas": 3,
                    "template": template,
                }
            ],
        },
    }
    objects.create_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters", body)
    wait_until(
        lambda: len(_pods(core_v1, namespace, "ray.io/cluster=rc,ray.io/node-type=worker")) == 3
    )
    (head,) = _pods(core_v1, namespace, "ray.io/cluster=rc,ray.io/node-type=head")
    assert (
        head.metadata.name.startswith("rc-head-") and len(head.metadata.name) == len("rc-head-") + 5
    )
    assert head.metadata.labels["ray.io/group"] == "headgroup"
    workers = _pods(core_v1, namespace, "ray.io/cluster=rc,ray.io/group=cpu")
    assert all(w.metadata.name.startswith("rc-cpu-worker-") for w in workers)
    # Each runs ray start as KubeRay builds it; workers find the head by its Service's name.
    assert head.spec.containers[0].command == ["/bin/bash", "-c", "--"]
    assert head.spec.containers[0].args == [
        "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start --head --block"
        " --dashboard-agent-listen-port=52365 --dashboard-host=0.0.0.0 --metrics-export-port=8080"
    ]
    for worker in workers:
        args = worker.spec.containers[0].args[0]
        assert f" --address=rc-head-svc.{namespace}.svc.cluster.local:6379 " in args
    service = core_v1.read_namespaced_service("rc-head-svc", namespace)
    assert service.spec.cluster_ip == "None"
    assert {p.name for p in service.spec.ports} >= {"gcs-server", "dashboard", "client"}

    def ready() -> Any:
        status = objects.get_namespaced_custom_object(
            "ray.io", "v1", namespace, "rayclusters", "rc"
        )
        return status.get("status", {}).get("state") == "ready" and status["status"]

    status = wait_until(ready)
    assert status["desiredWorkerReplicas"] == 3 and status["readyWorkerReplicas"] == 3
    assert status["head"]["podName"] == head.metadata.name
    core_v1.delete_namespaced_pod(head.metadata.name, namespace, grace_period_seconds=0)

    def new_head() -> bool:
        now = _pods(core_v1, namespace, "ray.io/cluster=rc,ray.io/node-type=head")
        return len(now) == 1 and now[0].metadata.name != head.metadata.name

    wait_until(new_head)


def test_a_spark_connect_becomes_a_server_its_service_and_executors(
    extensions: kubernetes.client.ApiextensionsV1Api,
    objects: kubernetes.client.CustomObjectsApi,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    _install(extensions, wait_until, "sparkconnects")
    body = {
        "apiVersion": "sparkoperator.k8s.io/v1alpha1",
        "kind": "SparkConnect",
        "metadata": {"name": "sc"},
        "spec": {
            "sparkVersion": "4.0.0",
            "image": "spark:4.0.0",
            "server": {"cores": 1, "memory": "1g"},
            "executor": {"cores": 1, "memory": "1g", "instances": 2},
        },
    }
    objects.create_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1alpha1", namespace, "sparkconnects", body
    )
    executors = "sparkoperator.k8s.io/connect-name=sc,spark-role=executor"
    wait_until(lambda: len(_pods(core_v1, namespace, executors)) == 2)
    server = core_v1.read_namespaced_pod("sc-server", namespace)
    assert server.metadata.labels["spark-role"] == "connect-server"
    assert server.spec.containers[0].name == "spark-kubernetes-driver"
    assert sorted(p.metadata.name for p in _pods(core_v1, namespace, executors)) == [
        "sc-exec-1",
        "sc-exec-2",
    ]
    ports = {
        p.name: p.port for p in core_v1.read_namespaced_service("sc-server", namespace).spec.ports
    }
    assert ports["spark-connect-server"] == 15002

    def ready() -> Any:
        found = objects.get_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1alpha1", namespace, "sparkconnects", "sc"
        )
        status = found.get("status") or {}
        return (
            status.get("state") == "Ready" and status.get("executors") == {"running": 2} and status
        )

    status = wait_until(ready)
    assert status["server"] == {
        "podName": "sc-server",
        "podIp": server.status.pod_ip or status["server"]["podIp"],
        "serviceName": "sc-server",
    }


RAY_IMAGE = "docker.io/rayproject/ray:2.60.0"


def _ray_cluster(name: str) -> dict[str, Any]:
    """A RayCluster as the service makes one: the head declares its ports, one worker."""

    def template(role: str, **container: Any) -> dict[str, Any]:
        resources = {"limits": {"cpu": "2", "memory": "2Gi"}}
        return {
            "spec": {
                "containers": [
                    {"name": f"ray-{role}", "image": RAY_IMAGE, "resources": resources, **container}
                ]
            }
        }

    ports = [
        {"name": "gcs-server", "containerPort": 6379},
        {"name": "dashboard", "containerPort": 8265},
        {"name": "client", "containerPort": 10001},
    ]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {"dashboard-host": "0.0.0.0"},
                "template": template("head", ports=ports),
            },
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": 1,
                    "minReplicas": 0,
                    "maxReplicas": 2,
                    "rayStartParams": {},
                    "template": template("worker"),
                }
            ],
        },
    }


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.cluster_settings(programs={"*/rayproject/ray": ImageProgram()})
def test_a_ray_cluster_of_real_processes_runs_tasks_on_its_head_and_worker(
    extensions: kubernetes.client.ApiextensionsV1Api,
    objects: kubernetes.client.CustomObjectsApi,
    core_v1: kubernetes.client.CoreV1Api,
    emulator: KubernetesEmulator,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """Head and worker run ``ray start`` as KubeRay builds it, as real Ray nodes on their pods'
    addresses; a driver reaches the head through its Service with the Ray client, as a lab
    does, and runs a task on each node; deleting the cluster leaves no Ray process behind."""
    _install(extensions, wait_until, "rayclusters")
    objects.create_namespaced_custom_object(
        "ray.io", "v1", namespace, "rayclusters", _ray_cluster("real")
    )
    selector = "ray.io/cluster=real"

    def running() -> list[Any]:
        pods = _pods(core_v1, namespace, selector)
        ready = [
            p
            for p in pods
            if p.status.pod_ip and emulator.cluster.processes.running(p.metadata.uid)
        ]
        return ready if len(ready) == 2 else []

    pods = {p.metadata.labels["ray.io/node-type"]: p for p in wait_until(running, timeout=30)}
    head, worker = pods["head"], pods["worker"]
    service = core_v1.read_namespaced_service("real-head-svc", namespace)
    address = service.spec.cluster_ip
    assert address.startswith("127.")
    assert {p.target_port for p in service.spec.ports if p.name in ("gcs-server", "client")} == {
        "gcs-server",
        "client",
    }
    # KubeRay's command: ray start through bash, the worker pointed at the head's Service.
    for pod in (head, worker):
        container = pod.spec.containers[0]
        assert container.command == ["/bin/bash", "-c", "--"]
        assert container.args[0].startswith("ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ")
        assert " --block " in container.args[0]
        assert " --node-ip-address=$(POD_IP) " in container.args[0]
    assert "ray start --head " in head.spec.containers[0].args[0]
    assert f" --address={address}:6379 " in worker.spec.containers[0].args[0]
    head_ports = {p.name: p.container_port for p in head.spec.containers[0].ports}
    assert head_ports["gcs-server"] != 6379 and head_ports["client"] != 10001

    def head_ready() -> bool:
        pod = core_v1.read_namespaced_pod(head.metadata.name, namespace)
        return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])

    wait_until(head_ready, timeout=120)  # once its client server listens

    def ready_status() -> Any:
        found = objects.get_namespaced_custom_object(
            "ray.io", "v1", namespace, "rayclusters", "real"
        )
        return found.get("status", {}).get("state") == "ready" and found["status"]

    assert wait_until(ready_status)["head"]["serviceIP"] == address
    sessions = [
        pid for p in (head, worker) for pid in emulator.cluster.processes.running(p.metadata.uid)
    ]
    answer = run_tasks(f"ray://{address}:10001")
    assert_a_task_ran_on_each(answer, [head.status.pod_ip, worker.status.pod_ip])

    objects.delete_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters", "real")
    wait_until(lambda: not _pods(core_v1, namespace, selector), timeout=60)
    wait_until(lambda: not left_running(sessions), timeout=30)

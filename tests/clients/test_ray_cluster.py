"""A Ray cluster made through the service on the stack ``make run`` starts: its head and worker
run as real Ray nodes, a process on the machine (as a lab's kernel is) reaches it at the
``scheduler_address`` the service gives and runs a task on each node with the Ray client, and
deleting the cluster through the service leaves no Ray process behind."""

from __future__ import annotations

import pytest
from labspawner import LabSpawnerClient

from devstack.stack import LocalStack
from tests.labs.conftest import wait_for
from tests.support.ray_driver import assert_a_task_ran_on_each, left_running, run_tasks
from tests.support.real_labs import running_lab

USER = "rachel"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_ray_cluster_made_through_the_service_runs_a_labs_tasks(
    real_lab_stack: LocalStack, real_tokens: dict[str, str]
) -> None:
    namespace = f"nublado-{USER}"
    with (
        running_lab(real_lab_stack, real_tokens, USER),
        LabSpawnerClient(real_lab_stack.spawner_url, real_tokens[USER]) as client,
    ):
        # Running once the head's client server listens.
        cluster = client.clusters.create(USER, "rayclusters", workers=1, timeout=180)
        assert (cluster.kind, cluster.workers) == ("rayclusters", 1)
        # On the local stack the service names heads by cluster IP (clusters.reachBy).
        service = real_lab_stack.kube.store.get("services", namespace, f"{cluster.name}-head-svc")
        assert service is not None
        assert cluster.scheduler_address == f"ray://{service['spec']['clusterIP']}:10001"

        def pods() -> list[dict]:
            return [
                p
                for p in real_lab_stack.kube.store.list("pods", namespace)
                if (p["metadata"].get("labels") or {}).get("ray.io/cluster") == cluster.name
            ]

        processes = real_lab_stack.kube.cluster.processes
        sessions = [pid for p in pods() for pid in processes.running(p["metadata"]["uid"])]
        assert len(sessions) == 2  # the head's and the worker's Ray containers

        answer = run_tasks(cluster.scheduler_address)
        assert_a_task_ran_on_each(answer, [p["status"]["podIP"] for p in pods()])

        client.clusters.delete(USER, cluster.name, wait=True, timeout=60)
        wait_for(lambda: not pods(), timeout=60)
        wait_for(lambda: not left_running(sessions), timeout=30)

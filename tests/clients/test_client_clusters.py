"""The Python client's cluster calls against the service on the local stack: the service's
cluster routes and the cluster scaler API, with the errors each raises."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from labspawner import ConflictError, LabSpawnerClient, NotFoundError, PermissionDeniedError

from devstack.stack import LocalStack
from tests.clients.conftest import delete_lab

USER = "wile"
"""wile has the default budget of the stack's demo configuration: one cluster, two workers,
4 cores and 16 GiB in all."""


@pytest.fixture
def wile(
    stack: LocalStack,
    stack_tokens: dict[str, str],
    admin: LabSpawnerClient,
    lab_options: dict[str, str],
) -> Iterator[LabSpawnerClient]:
    """wile's client, with a running lab; the lab goes after the test, and his clusters with
    it."""
    client = LabSpawnerClient(stack.spawner_url, stack_tokens[USER])
    status = client.spawn(USER, lab_options, wait=True, progress=False, timeout=60)
    assert status is not None and status.running
    yield client
    client.close()
    delete_lab(admin, USER)


def test_create_read_scale_retier_restart_and_delete(
    wile: LabSpawnerClient, admin: LabSpawnerClient, stack: LocalStack, stack_tokens: dict[str, str]
) -> None:
    cluster = wile.clusters.create(USER, workers=1, max_workers=3, timeout=60)
    assert cluster.running and not cluster.failed
    assert (cluster.kind, cluster.owner, cluster.workers, cluster.max_workers) == (
        "daskclusters",
        USER,
        1,
        3,
    )
    # The local stack names heads by cluster IP (clusters.reachBy), for clients on the machine.
    name = cluster.name
    service = stack.kube.store.get("services", f"nublado-{USER}", f"{name}-scheduler")
    assert service is not None
    assert cluster.scheduler_address == f"tcp://{service['spec']['clusterIP']}:8786"
    assert [c.name for c in wile.clusters.of(USER)] == [name]
    assert wile.clusters.get(USER, name) == cluster == admin.clusters.get(USER, name)
    listed = wile.clusters.scaler_list("daskclusters")
    assert listed["count"] == 1 and listed["clusters"][0]["metadata"]["name"] == name
    assert wile.clusters.scaler_object("daskclusters", name)["kind"] == "DaskCluster"

    with pytest.raises(ConflictError) as past:
        wile.clusters.scale("daskclusters", name, 3)
    assert (past.value.status, past.value.code) == (409, "quota_exceeded")
    scaled = wile.clusters.scale("daskclusters", name, 2, worker_tier="small")
    assert (scaled["effective_replicas"], scaled["capped"]) == (2, False)
    assert scaled["worker_hw_tier_id"]["name"] == "small"
    assert wile.clusters.get(USER, name).workers == 2

    with LabSpawnerClient(stack.spawner_url, stack_tokens["rachel"]) as rachel:
        with pytest.raises(PermissionDeniedError) as denied:
            rachel.clusters.scale("daskclusters", name, 1)
        assert denied.value.code == "unauthorized"
        assert rachel.clusters.scaler_list("daskclusters")["count"] == 0

    tiered = wile.clusters.set_head_tier("daskclusters", name, "medium")
    assert tiered["head_hw_tier_name"] == "medium"
    assert wile.clusters.get(USER, name).head_tier == "medium"
    restarted = wile.clusters.restart_head("daskclusters", name, timeout=60)
    assert (restarted["ok"], restarted["status"]) == (True, "restarted_and_ready")
    started = wile.clusters.restart_head("daskclusters", name, wait=False)
    assert started["grace_period_seconds"] == 20 and started["pod"] == restarted["pod"]

    wile.clusters.delete(USER, name, wait=True, timeout=60)
    with pytest.raises(NotFoundError):
        wile.clusters.get(USER, name)
    assert wile.clusters.of(USER) == []

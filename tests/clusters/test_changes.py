"""A cluster's changes (a scale, a head tier, a head restart) are operations of the engine:
each on the cluster's event stream, from who asked what to its end; one at a time, a change
sent while another runs waiting for it rather than refused; and one whose worker is killed
finished by another worker."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable
from typing import Any

from flask.testing import FlaskClient

from app.extensions.labs import machinery_of
from app.workloads.cluster.kind import cluster_ref
from devstack.kube import KubernetesEmulator
from tests.clusters.conftest import running_cluster
from tests.labs.conftest import LabUser, read_stream, wait_for
from tests.support.held_service import held_service

SCALER = "/ddl_cluster_scaler"


def _events_url(user: LabUser, name: str) -> str:
    return f"/spawner/v1/labs/{user.username}/clusters/{name}/events"


def _changed(
    client: FlaskClient, user: LabUser, name: str, route: str, body: Any, status: int
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The answer to a change of the user's cluster by the scaler's ``route``, and the
    events of its operation but for the progress bar's."""
    answer = client.patch(f"{SCALER}/{route}/daskclusters/{name}", json=body, headers=user.headers)
    assert answer.status_code == status, answer.get_data(as_text=True)
    events = read_stream(client, _events_url(user, name), user.headers)
    return answer.get_json(), [(e.type, e.data) for e in events if e.type != "progress"]


def test_each_change_is_an_operation_on_the_clusters_stream(
    client: FlaskClient, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    owner = new_user()
    cluster = running_cluster(client, owner, workers=1, max_workers=3)
    name, namespace, who = cluster["name"], cluster["namespace"], owner.username

    body = {"replicas": 2, "worker_hw_tier_name": "small"}
    assert _changed(client, owner, name, "scale", body, 200)[1] == [
        ("info", f"Scale of DaskCluster {name} to 2 workers of tier small requested by {who}"),
        ("info", f"Patching DaskCluster {name}"),
        ("info", f"{name} scaled to 2 workers of tier small"),
        ("complete", ""),
    ]
    body = {"head_hw_tier_name": "large"}
    assert _changed(client, owner, name, "head-hw-tier", body, 200)[1] == [
        ("info", f"Head tier large for DaskCluster {name} requested by {who}"),
        ("info", f"Patching DaskCluster {name}"),
        ("info", f"The head of {name} takes tier large when it is next made"),
        ("complete", ""),
    ]
    restart, restarted = _changed(client, owner, name, "restart_head", None, 202)
    pod, answered = restart["pod"], restart["k8s_response"]
    deleted = f"Deleted head pod {pod}; its operator makes it again. Kubernetes answered: "
    assert restarted[:2] == [
        ("info", f"Restart of the head of DaskCluster {name} ({pod}) requested by {who}"),
        ("info", f"Deleting head pod {pod} with a 20 s grace period"),
    ]
    assert restarted[2][1].startswith(deleted) and restarted[3] == ("complete", "")
    assert json.loads(restarted[2][1].removeprefix(deleted)) == answered
    assert answered["deletionGracePeriodSeconds"] == 20

    record = client.get(f"/spawner/v1/labs/{who}/clusters/{name}", headers=owner.headers).get_json()
    assert (record["status"], record["workers"], record["head_tier"]) == ("running", 2, "large")
    obj = kube.store.get("daskclusters", namespace, name)
    assert obj is not None and obj["spec"]["worker"]["replicas"] == 2


def test_a_change_sent_while_another_runs_waits_for_it(
    client: FlaskClient, new_user: Callable[..., LabUser], kube: KubernetesEmulator
) -> None:
    owner = new_user()
    cluster = running_cluster(client, owner, workers=1, max_workers=3)
    name, namespace = cluster["name"], cluster["namespace"]
    hub = machinery_of(client.application).hub
    answers: dict[int, Any] = {}

    def scale(replicas: int) -> None:
        answers[replicas] = client.application.test_client().patch(
            f"{SCALER}/scale/daskclusters/{name}",
            json={"replicas": replicas},
            headers=owner.headers,
        )

    # The first scale's patch is held at the API server: its operation runs on.
    pause = kube.faults.pause_next("patch", "daskclusters", namespace=namespace)
    first = threading.Thread(target=scale, args=(2,))
    second = threading.Thread(target=scale, args=(3,))
    try:
        first.start()
        assert pause.arrived.wait(10)
        streams = hub.streams  # the first request follows its operation
        second.start()
        # The second follows the first's operation too, waiting for it to end.
        wait_for(lambda: hub.streams > streams)
        assert 3 not in answers
    finally:
        kube.faults.cancel(pause)
        first.join(30)
        second.join(30)

    assert [answers[n].status_code for n in (2, 3)] == [200, 200]
    assert [answers[n].get_json()["effective_replicas"] for n in (2, 3)] == [2, 3]
    last = read_stream(client, _events_url(owner, name), owner.headers)
    assert last[0].data == f"Scale of DaskCluster {name} to 3 workers requested by {owner.username}"
    assert last[-1].type == "complete"
    record = client.get(
        f"/spawner/v1/labs/{owner.username}/clusters/{name}", headers=owner.headers
    ).get_json()
    assert (record["workers"], record["usage"]["workers"]) == (3, 3)
    obj = kube.store.get("daskclusters", namespace, name)
    assert obj is not None and obj["spec"]["worker"]["replicas"] == 3


def test_a_scale_whose_worker_is_killed_is_finished_by_another(
    client: FlaskClient,
    cluster_config: dict[str, Any],
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
) -> None:
    owner = new_user()
    cluster = running_cluster(client, owner, workers=1, max_workers=3)
    name, namespace = cluster["name"], cluster["namespace"]
    events = machinery_of(client.application).engine.events
    key = cluster_ref(owner.username, name).key
    patching = f"Patching DaskCluster {name}"

    with held_service(
        "tests.clusters.hold_a_change", [owner.token, name, "3"], cluster_config
    ) as holder:
        # The other process's worker runs the scale's operation, and dies in it.
        wait_for(lambda: any(e.data == patching for e in events.read(key)), timeout=60)
        holder.send_signal(signal.SIGKILL)

    finished = read_stream(client, _events_url(owner, name), owner.headers)
    assert (
        finished[0].data
        == f"Scale of DaskCluster {name} to 3 workers requested by {owner.username}"
    )
    assert [e.data for e in finished].count(patching) == 2, "begun, then resumed"
    assert [e.type for e in finished].count("complete") == 1
    assert finished[-1].type == "complete"
    record = client.get(
        f"/spawner/v1/labs/{owner.username}/clusters/{name}", headers=owner.headers
    ).get_json()
    assert (record["status"], record["workers"], record["usage"]["workers"]) == ("running", 3, 3)
    obj = kube.store.get("daskclusters", namespace, name)
    assert obj is not None and obj["spec"]["worker"]["replicas"] == 3

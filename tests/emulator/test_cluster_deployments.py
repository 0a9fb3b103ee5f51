"""Deployments and ReplicaSets, through the real client: the ReplicaSet a template gets, the
rolling update that keeps the old pod serving until the new one is Ready, Recreate, scaling to
zero and back, quota refusals and image pull failures as the status reports them, pruning of
old revisions, cascading deletion, and the API server's rules for them."""

from __future__ import annotations

from typing import Any

import kubernetes.client
import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from devstack.kube import KubernetesEmulator
from devstack.kube.cluster import rollout
from devstack.kube.cluster.replicasets import deletion_order

from .conftest import WaitUntil

HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"


@pytest.fixture(autouse=True)
def node(emulator: KubernetesEmulator) -> None:
    """A node for the Deployments' pods to run on."""
    emulator.cluster.add_node("node-1")


def _deployment(name: str, value: str = "1", image: str = "lab:1", **spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    container = {"name": "lab", "image": image, "env": [{"name": "VERSION", "value": value}]}
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            **spec,
        },
    }


def _new_template(value: str, image: str = "lab:1") -> dict[str, Any]:
    container = {"name": "lab", "image": image, "env": [{"name": "VERSION", "value": value}]}
    return {"spec": {"template": {"spec": {"containers": [container]}}}}


def _status(apps_v1: kubernetes.client.AppsV1Api, namespace: str, name: str) -> Any:
    return apps_v1.read_namespaced_deployment(name, namespace).status


def _conditions(status: Any) -> dict[str, Any]:
    return {c.type: c for c in status.conditions or []}


def _replicasets(apps_v1: kubernetes.client.AppsV1Api, namespace: str, app: str) -> list[Any]:
    """The Deployment's ReplicaSets, oldest revision first."""
    found = apps_v1.list_namespaced_replica_set(namespace, label_selector=f"app={app}").items
    return sorted(found, key=lambda r: int(r.metadata.annotations[REVISION]))


def _pods(core_v1: kubernetes.client.CoreV1Api, namespace: str, app: str) -> list[Any]:
    return core_v1.list_namespaced_pod(namespace, label_selector=f"app={app}").items


def _serving(apps_v1: kubernetes.client.AppsV1Api, namespace: str, name: str) -> Any:
    """The status once one pod of the current template is Ready and nothing else runs."""
    status = _status(apps_v1, namespace, name)
    done = (
        status.ready_replicas == 1
        and status.replicas == 1
        and status.updated_replicas == 1
        and not status.terminating_replicas
        and _conditions(status).get("Progressing") is not None
        and _conditions(status)["Progressing"].reason == "NewReplicaSetAvailable"
    )
    return status if done else None


def test_a_deployment_runs_its_pod_through_a_replicaset(
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    created = apps_v1.create_namespaced_deployment(namespace, _deployment("web"))
    assert created.spec.replicas == 1
    assert created.spec.strategy.type == "RollingUpdate"
    assert created.spec.strategy.rolling_update.max_surge == "25%"
    assert created.spec.strategy.rolling_update.max_unavailable == "25%"
    assert created.spec.revision_history_limit == 10
    assert created.spec.progress_deadline_seconds == 600
    assert created.metadata.generation == 1

    status = wait_until(lambda: _serving(apps_v1, namespace, "web"))
    assert status.available_replicas == 1
    assert status.observed_generation == 1
    assert status.terminating_replicas == 0
    assert status.unavailable_replicas is None
    available = _conditions(status)["Available"]
    assert (available.status, available.reason) == ("True", "MinimumReplicasAvailable")

    (replicaset,) = _replicasets(apps_v1, namespace, "web")
    pod_hash = replicaset.metadata.labels[HASH]
    assert replicaset.metadata.name == f"web-{pod_hash}"
    assert replicaset.spec.selector.match_labels == {"app": "web", HASH: pod_hash}
    assert replicaset.spec.template.metadata.labels == {"app": "web", HASH: pod_hash}
    owner = replicaset.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller) == ("Deployment", "web", True)
    assert replicaset.metadata.annotations[REVISION] == "1"
    deployment = apps_v1.read_namespaced_deployment("web", namespace)
    assert deployment.metadata.annotations[REVISION] == "1"
    assert replicaset.status.ready_replicas == 1
    assert replicaset.status.observed_generation == 1

    (pod,) = _pods(core_v1, namespace, "web")
    assert pod.metadata.name.startswith(f"web-{pod_hash}-")
    assert len(pod.metadata.name) == len(f"web-{pod_hash}-") + 5
    assert pod.metadata.labels[HASH] == pod_hash
    pod_owner = pod.metadata.owner_references[0]
    assert (pod_owner.kind, pod_owner.name) == ("ReplicaSet", replicaset.metadata.name)
    assert pod.status.phase == "Running"


def test_rolling_update_keeps_the_old_pod_serving_until_the_new_one_is_ready(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    apps_v1.create_namespaced_deployment(namespace, _deployment("web"))
    wait_until(lambda: _serving(apps_v1, namespace, "web"))
    (old_pod,) = _pods(core_v1, namespace, "web")
    emulator.cluster.settings.start_seconds = 0.5  # the new pod takes a while to be Ready

    apps_v1.patch_namespaced_deployment("web", namespace, _new_template("2"))

    def surging() -> Any:
        status = _status(apps_v1, namespace, "web")
        return status.replicas == 2 and status.updated_replicas == 1 and status

    status = wait_until(surging)
    assert status.ready_replicas == 1
    assert status.observed_generation == 2
    assert _conditions(status)["Available"].status == "True"
    old_rs, new_rs = _replicasets(apps_v1, namespace, "web")
    assert (old_rs.spec.replicas, new_rs.spec.replicas) == (1, 1)
    serving = core_v1.read_namespaced_pod(old_pod.metadata.name, namespace)
    assert serving.metadata.deletion_timestamp is None
    assert serving.status.phase == "Running"

    status = wait_until(lambda: _serving(apps_v1, namespace, "web"))
    assert status.observed_generation == 2
    old_rs, new_rs = _replicasets(apps_v1, namespace, "web")
    assert (old_rs.spec.replicas, old_rs.status.replicas) == (0, 0)
    assert new_rs.metadata.annotations[REVISION] == "2"
    assert new_rs.metadata.labels[HASH] != old_rs.metadata.labels[HASH]
    deployment = apps_v1.read_namespaced_deployment("web", namespace)
    assert deployment.metadata.annotations[REVISION] == "2"
    wait_until(lambda: len(_pods(core_v1, namespace, "web")) == 1)
    (pod,) = _pods(core_v1, namespace, "web")
    assert pod.metadata.labels[HASH] == new_rs.metadata.labels[HASH]
    assert pod.spec.containers[0].env[0].value == "2"
    messages = [e.message for e in core_v1.list_namespaced_event(namespace).items]
    assert f"Scaled down replica set {old_rs.metadata.name} from 1 to 0" in messages


@pytest.mark.cluster_settings(pod_termination_seconds=0.5)
def test_scaling_to_zero_terminates_the_pod_and_back_to_one_starts_another(
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    apps_v1.create_namespaced_deployment(namespace, _deployment("web"))
    wait_until(lambda: _serving(apps_v1, namespace, "web"))
    (first,) = _pods(core_v1, namespace, "web")

    apps_v1.patch_namespaced_deployment("web", namespace, {"spec": {"replicas": 0}})

    def terminating() -> Any:
        status = _status(apps_v1, namespace, "web")
        return status.terminating_replicas == 1 and status

    status = wait_until(terminating)
    assert not status.replicas and not status.ready_replicas
    pod = core_v1.read_namespaced_pod(first.metadata.name, namespace)
    assert pod.metadata.deletion_timestamp is not None

    def stopped() -> Any:
        status = _status(apps_v1, namespace, "web")
        return status.terminating_replicas == 0 and not _pods(core_v1, namespace, "web") and status

    status = wait_until(stopped)
    assert not status.replicas
    (replicaset,) = _replicasets(apps_v1, namespace, "web")  # scaling makes no new one
    assert replicaset.spec.replicas == 0

    apps_v1.patch_namespaced_deployment("web", namespace, {"spec": {"replicas": 1}})
    wait_until(lambda: _serving(apps_v1, namespace, "web"))
    (second,) = _pods(core_v1, namespace, "web")
    assert second.metadata.name != first.metadata.name
    assert second.metadata.owner_references[0].name == replicaset.metadata.name
    assert len(_replicasets(apps_v1, namespace, "web")) == 1


def test_a_deleted_pod_is_replaced(
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    apps_v1.create_namespaced_deployment(namespace, _deployment("web"))
    wait_until(lambda: _serving(apps_v1, namespace, "web"))
    (first,) = _pods(core_v1, namespace, "web")

    core_v1.delete_namespaced_pod(first.metadata.name, namespace, grace_period_seconds=0)

    def replaced() -> Any:
        pods = _pods(core_v1, namespace, "web")
        return [p for p in pods if p.metadata.name != first.metadata.name]

    (second,) = wait_until(replaced)
    assert second.metadata.owner_references[0].uid == first.metadata.owner_references[0].uid
    wait_until(lambda: _serving(apps_v1, namespace, "web"))


def test_a_quota_refusal_is_a_replica_failure_until_the_quota_allows_the_pod(
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    quota = {"metadata": {"name": "labs"}, "spec": {"hard": {"pods": "0"}}}
    core_v1.create_namespaced_resource_quota(namespace, quota)
    apps_v1.create_namespaced_deployment(namespace, _deployment("web"))

    def failing() -> Any:
        return _conditions(_status(apps_v1, namespace, "web")).get("ReplicaFailure")

    failure = wait_until(failing)
    assert (failure.status, failure.reason) == ("True", "FailedCreate")
    assert "is forbidden: exceeded quota: labs, requested: pods=1" in failure.message
    (replicaset,) = _replicasets(apps_v1, namespace, "web")
    rs_failure = _conditions(replicaset.status)["ReplicaFailure"]
    assert rs_failure.message == failure.message
    events = [
        e
        for e in core_v1.list_namespaced_event(namespace).items
        if e.reason == "FailedCreate" and e.involved_object.name == replicaset.metadata.name
    ]
    assert events and events[0].type == "Warning"
    assert events[0].involved_object.kind == "ReplicaSet"
    assert events[0].source.component == "replicaset-controller"
    assert events[0].message.startswith('Error creating: pods "')
    assert "exceeded quota: labs" in events[0].message
    status = _status(apps_v1, namespace, "web")
    assert not status.replicas and not status.ready_replicas
    assert _conditions(status)["Available"].status == "False"
    assert not _pods(core_v1, namespace, "web")

    core_v1.patch_namespaced_resource_quota("labs", namespace, {"spec": {"hard": {"pods": "1"}}})
    status = wait_until(lambda: _serving(apps_v1, namespace, "web"))
    assert "ReplicaFailure" not in _conditions(status)
    (replicaset,) = _replicasets(apps_v1, namespace, "web")
    assert "ReplicaFailure" not in _conditions(replicaset.status)


def test_an_unpullable_image_leaves_the_deployment_unavailable_past_its_deadline(
    emulator: KubernetesEmulator,
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    emulator.cluster.faults.set("image_pull", "broken:*", "manifest unknown")
    body = _deployment("web", image="broken:1", progressDeadlineSeconds=1)
    apps_v1.create_namespaced_deployment(namespace, body)

    def waiting_reason() -> Any:
        pods = _pods(core_v1, namespace, "web")
        statuses = (pods[0].status.container_statuses or []) if pods else []
        waiting = statuses[0].state.waiting if statuses else None
        return waiting is not None and waiting.reason in ("ErrImagePull", "ImagePullBackOff")

    wait_until(waiting_reason)
    status = _status(apps_v1, namespace, "web")
    assert status.replicas == 1 and not status.ready_replicas
    assert status.unavailable_replicas == 1
    available = _conditions(status)["Available"]
    assert (available.status, available.reason) == ("False", "MinimumReplicasUnavailable")

    def timed_out() -> Any:
        progressing = _conditions(_status(apps_v1, namespace, "web")).get("Progressing")
        return progressing is not None and progressing.status == "False" and progressing

    progressing = wait_until(timed_out, timeout=5)
    assert progressing.reason == "ProgressDeadlineExceeded"
    (replicaset,) = _replicasets(apps_v1, namespace, "web")
    assert progressing.message == (
        f'ReplicaSet "{replicaset.metadata.name}" has timed out progressing.'
    )


@pytest.mark.cluster_settings(pod_termination_seconds=0.3)
def test_recreate_removes_the_old_pod_before_making_the_new_one(
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    apps_v1.create_namespaced_deployment(
        namespace, _deployment("web", strategy={"type": "Recreate"})
    )
    wait_until(lambda: _serving(apps_v1, namespace, "web"))
    (old_pod,) = _pods(core_v1, namespace, "web")
    since = core_v1.list_namespaced_pod(namespace).metadata.resource_version

    apps_v1.patch_namespaced_deployment("web", namespace, _new_template("2"))

    order: list[tuple[str, str]] = []
    stream = watch.Watch()
    for event in stream.stream(
        core_v1.list_namespaced_pod, namespace, resource_version=since, timeout_seconds=5
    ):
        pod = event["object"]
        order.append((event["type"], pod.metadata.name))
        if event["type"] == "ADDED" and pod.metadata.name != old_pod.metadata.name:
            stream.stop()
    new_name = order[-1][1]
    assert ("DELETED", old_pod.metadata.name) in order
    assert order.index(("DELETED", old_pod.metadata.name)) < order.index(("ADDED", new_name))

    status = wait_until(lambda: _serving(apps_v1, namespace, "web"))
    assert status.observed_generation == 2
    old_rs, new_rs = _replicasets(apps_v1, namespace, "web")
    assert (old_rs.spec.replicas, new_rs.spec.replicas) == (0, 1)
    assert new_name.startswith(new_rs.metadata.name + "-")


def test_old_replicasets_past_the_revision_history_limit_are_deleted(
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    apps_v1.create_namespaced_deployment(namespace, _deployment("web", revisionHistoryLimit=1))
    wait_until(lambda: _serving(apps_v1, namespace, "web"))

    def revisions() -> list[str]:
        return [r.metadata.annotations[REVISION] for r in _replicasets(apps_v1, namespace, "web")]

    for value in ("2", "3"):
        apps_v1.patch_namespaced_deployment("web", namespace, _new_template(value))
        # The new revision serves and, beyond the limit of one old one, the oldest is gone.
        wanted = [str(int(value) - 1), value]
        wait_until(
            lambda wanted=wanted: _serving(apps_v1, namespace, "web") and revisions() == wanted
        )
    assert revisions() == ["2", "3"]


def test_deleting_the_deployment_deletes_its_replicasets_and_pods(
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    apps_v1.create_namespaced_deployment(namespace, _deployment("web", replicas=2))
    wait_until(lambda: _status(apps_v1, namespace, "web").ready_replicas == 2)
    unrelated = {
        "metadata": {"name": "lab"},
        "spec": {"containers": [{"name": "c", "image": "x:1"}]},
    }
    core_v1.create_namespaced_pod(namespace, unrelated)

    answer = apps_v1.delete_namespaced_deployment("web", namespace)
    assert (answer["kind"], answer["status"]) == ("Status", "Success")  # as kube-apiserver

    wait_until(
        lambda: not _replicasets(apps_v1, namespace, "web") and not _pods(core_v1, namespace, "web")
    )
    assert core_v1.read_namespaced_pod("lab", namespace).metadata.name == "lab"


def test_deleting_the_namespace_removes_its_deployments(
    core_v1: kubernetes.client.CoreV1Api,
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    apps_v1.create_namespaced_deployment(namespace, _deployment("web"))
    wait_until(lambda: _serving(apps_v1, namespace, "web"))

    core_v1.delete_namespace(namespace)

    def gone() -> bool:
        try:
            core_v1.read_namespace(namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_until(gone)
    assert not apps_v1.list_deployment_for_all_namespaces().items
    assert not apps_v1.list_replica_set_for_all_namespaces().items
    assert not core_v1.list_pod_for_all_namespaces().items


def test_a_pod_is_available_only_after_min_ready_seconds(
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    apps_v1.create_namespaced_deployment(namespace, _deployment("web", minReadySeconds=1))

    def ready() -> Any:
        status = _status(apps_v1, namespace, "web")
        return status.ready_replicas == 1 and status

    status = wait_until(ready)
    assert not status.available_replicas
    assert _conditions(status)["Available"].status == "False"
    status = wait_until(lambda: _serving(apps_v1, namespace, "web"), timeout=5)
    assert status.available_replicas == 1
    assert _conditions(status)["Available"].status == "True"


def test_the_selector_must_match_the_template_and_cannot_change(
    apps_v1: kubernetes.client.AppsV1Api,
    namespace: str,
) -> None:
    body = _deployment("web")
    body["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    with pytest.raises(ApiException) as raised:
        apps_v1.create_namespaced_deployment(namespace, body)
    assert raised.value.status == 422
    assert "`selector` does not match template `labels`" in raised.value.body

    empty = _deployment("web")
    empty["spec"]["selector"] = {}
    with pytest.raises(ApiException) as raised:
        apps_v1.create_namespaced_deployment(namespace, empty)
    assert raised.value.status == 422
    assert "empty selector is invalid for deployment" in raised.value.body

    apps_v1.create_namespaced_deployment(namespace, _deployment("web"))
    changed = {"spec": {"selector": {"matchLabels": {"app": "web", "tier": "x"}}}}
    changed["spec"]["template"] = {"metadata": {"labels": {"app": "web", "tier": "x"}}}
    with pytest.raises(ApiException) as raised:
        apps_v1.patch_namespaced_deployment("web", namespace, changed)
    assert raised.value.status == 422
    assert "field is immutable" in raised.value.body

    both_zero = _deployment(
        "zero", strategy={"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}
    )
    with pytest.raises(ApiException) as raised:
        apps_v1.create_namespaced_deployment(namespace, both_zero)
    assert raised.value.status == 422
    assert "may not be 0 when `maxSurge` is 0" in raised.value.body


def test_discovery_lists_deployments_and_replicasets(
    apps_v1: kubernetes.client.AppsV1Api,
) -> None:
    resources = {r.name: r for r in apps_v1.get_api_resources().resources}
    assert resources["deployments"].short_names == ["deploy"]
    assert resources["replicasets"].short_names == ["rs"]
    assert resources["deployments"].namespaced
    assert "deployments/status" in resources and "replicasets/status" in resources


def test_surge_rounds_up_and_unavailability_down() -> None:
    def deployment(replicas: int, surge: Any, unavailable: Any) -> dict[str, Any]:
        rolling = {"maxSurge": surge, "maxUnavailable": unavailable}
        return {"spec": {"replicas": replicas, "strategy": {"rollingUpdate": rolling}}}

    assert rollout.fenceposts(deployment(1, "25%", "25%")) == (1, 0)
    assert rollout.fenceposts(deployment(10, "25%", "25%")) == (3, 2)
    assert rollout.fenceposts(deployment(0, "25%", "25%")) == (0, 1)  # never both 0
    assert rollout.fenceposts(deployment(4, 2, "50%")) == (2, 2)


def test_excess_pods_are_chosen_least_useful_first() -> None:
    def pod(name: str, node: str | None, ready: str | None, created: str) -> dict[str, Any]:
        conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": ready}]
        return {
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"nodeName": node} if node else {},
            "status": {
                "phase": "Running" if ready else "Pending",
                "conditions": conditions if ready else [],
            },
        }

    pods = [
        pod("long-ready", "n", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"),
        pod("recently-ready", "n", "2026-01-01T01:00:00Z", "2026-01-01T00:00:00Z"),
        pod("pending", "n", None, "2026-01-01T00:00:00Z"),
        pod("unscheduled", None, None, "2026-01-01T00:00:00Z"),
    ]
    ranked = [p["metadata"]["name"] for p in sorted(pods, key=deletion_order)]
    assert ranked == ["unscheduled", "pending", "recently-ready", "long-ready"]

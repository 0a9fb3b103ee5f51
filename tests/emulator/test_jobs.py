"""batch/v1 Jobs, through the real client: the defaults and generated selector the API server
gives a Job, its pod run to completion (a real process) or retried until the backoff limit,
the deadline, the status a watch sees, deletion with each propagation policy, the TTL after
it finished, and the API server's rules for Jobs."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import kubernetes.client
import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from devstack.kube import KubernetesEmulator
from devstack.kube.cluster.programs import ImageProgram

from .conftest import WaitUntil

PROCESS_IMAGE = "registry.test/proc:1"
PROGRAMS = {"registry.test/proc": ImageProgram(entrypoint=(sys.executable, "-c"))}
UID_LABEL = "batch.kubernetes.io/controller-uid"
NAME_LABEL = "batch.kubernetes.io/job-name"
TRACKING = "batch.kubernetes.io/job-tracking"


@pytest.fixture(autouse=True)
def node(emulator: KubernetesEmulator) -> None:
    """A node for the Jobs' pods to run on."""
    emulator.cluster.add_node("node-1")


def _job(name: str, command: list[str], *, restart: str = "Never", **spec: Any) -> dict[str, Any]:
    """A Job of one emulated container whose ``command`` decides how it ends."""
    container = {"name": "main", "image": "busybox:1.36", "command": command}
    pod_spec = {"restartPolicy": restart, "containers": [container]}
    return {"metadata": {"name": name}, "spec": {**spec, "template": {"spec": pod_spec}}}


def _process_job(name: str, code: str, *, restart: str = "Never", **spec: Any) -> dict[str, Any]:
    """A Job whose container runs ``code`` as a real Python process."""
    container = {"name": "main", "image": PROCESS_IMAGE, "args": [code]}
    pod_spec = {
        "restartPolicy": restart,
        "terminationGracePeriodSeconds": 1,
        "containers": [container],
    }
    return {"metadata": {"name": name}, "spec": {**spec, "template": {"spec": pod_spec}}}


def _conditions(job: Any) -> list[tuple[str, str, str, str]]:
    return [(c.type, c.status, c.reason, c.message) for c in job.status.conditions or []]


def _finished(batch_v1: kubernetes.client.BatchV1Api, namespace: str, name: str) -> Any:
    """The Job once it has its Complete or Failed condition, else None."""
    job = batch_v1.read_namespaced_job(name, namespace)
    done = any(c[0] in ("Complete", "Failed") and c[1] == "True" for c in _conditions(job))
    return job if done else None


def _pods(core_v1: kubernetes.client.CoreV1Api, namespace: str, name: str) -> list[Any]:
    found = core_v1.list_namespaced_pod(namespace, label_selector=f"{NAME_LABEL}={name}").items
    return sorted(found, key=lambda p: p.metadata.creation_timestamp)


def _watch_jobs(
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
    since: str,
    last: Callable[[str, Any], bool],
) -> list[tuple[str, Any]]:
    """The Job events after resourceVersion ``since``, up to the first that ``last`` picks."""
    seen = []
    stream = watch.Watch()
    for event in stream.stream(
        batch_v1.list_namespaced_job, namespace, resource_version=since, timeout_seconds=20
    ):
        seen.append((event["type"], event["object"]))
        if last(event["type"], event["object"]):
            stream.stop()
    return seen


def _refusal(raised: pytest.ExceptionInfo[ApiException]) -> list[tuple[str, str, str]]:
    """The causes of a 422, as (field, reason, message)."""
    assert raised.value.status == 422
    causes = json.loads(raised.value.body)["details"]["causes"]
    return [(c["field"], c["reason"], c["message"]) for c in causes]


def _job_events(
    core_v1: kubernetes.client.CoreV1Api, namespace: str, wait_until: WaitUntil, count: int
) -> list[tuple[str, ...]]:
    """The Events about Jobs, oldest first, once there are ``count`` of them (the controller
    records the last one after it wrote the status a test waited for)."""

    def events() -> list[tuple[str, ...]]:
        return [
            (e.involved_object.name, e.type, e.reason, e.message, e.source.component)
            for e in core_v1.list_namespaced_event(namespace).items
            if e.involved_object.kind == "Job"
        ]

    found: list[tuple[str, ...]] = wait_until(lambda: len(events()) >= count and events())
    return found


@pytest.mark.cluster_settings(programs=PROGRAMS)
def test_a_job_runs_its_pod_to_completion_and_a_watch_sees_it(
    core_v1: kubernetes.client.CoreV1Api,
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    created = batch_v1.create_namespaced_job(namespace, _process_job("once", "print('done')"))
    uid = created.metadata.uid
    spec = created.spec
    assert (spec.completions, spec.parallelism, spec.backoff_limit) == (1, 1, 6)
    assert (spec.completion_mode, spec.suspend, spec.manual_selector) == (
        "NonIndexed",
        False,
        False,
    )
    assert spec.pod_replacement_policy == "TerminatingOrFailed"
    generated = {"controller-uid": uid, UID_LABEL: uid, "job-name": "once", NAME_LABEL: "once"}
    assert spec.selector.match_labels == {UID_LABEL: uid}
    assert spec.template.metadata.labels == generated
    assert created.metadata.labels == generated

    def complete(_: str, job: Any) -> bool:
        return "Complete" in [c[0] for c in _conditions(job)]

    events = _watch_jobs(batch_v1, namespace, created.metadata.resource_version, complete)
    seen = [(kind, job.status.active, [c[0] for c in _conditions(job)]) for kind, job in events]
    assert seen[0] == ("MODIFIED", 1, [])  # its first pod made
    assert seen[-1] == ("MODIFIED", None, ["SuccessCriteriaMet", "Complete"])

    job = batch_v1.read_namespaced_job("once", namespace)
    status = job.status
    assert (status.succeeded, status.failed, status.active) == (1, None, None)
    assert (status.ready, status.terminating) == (0, 0)
    assert status.start_time <= status.completion_time
    reached = ("CompletionsReached", "Reached expected number of succeeded pods")
    assert _conditions(job) == [
        ("SuccessCriteriaMet", "True", *reached),
        ("Complete", "True", *reached),
    ]
    assert job.status.conditions[1].last_transition_time == status.completion_time

    (pod,) = _pods(core_v1, namespace, "once")
    assert pod.status.phase == "Succeeded"
    assert pod.metadata.name.startswith("once-") and len(pod.metadata.name) == len("once-") + 5
    assert pod.metadata.labels == generated
    assert pod.metadata.finalizers is None  # counted, so the tracking finalizer is off
    (owner,) = pod.metadata.owner_references
    assert (owner.api_version, owner.kind, owner.name, owner.uid) == (
        "batch/v1",
        "Job",
        "once",
        uid,
    )
    assert owner.controller and owner.block_owner_deletion
    created_pod = f"Created pod: {pod.metadata.name}"
    assert _job_events(core_v1, namespace, wait_until, 2) == [
        ("once", "Normal", "SuccessfulCreate", created_pod, "job-controller"),
        ("once", "Normal", "Completed", "Job completed", "job-controller"),
    ]


def test_a_running_pod_counts_as_active_and_ready_and_keeps_its_tracking_finalizer(
    core_v1: kubernetes.client.CoreV1Api,
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    batch_v1.create_namespaced_job(namespace, _job("long", ["sleep", "600"]))

    def running() -> Any:
        status = batch_v1.read_namespaced_job("long", namespace).status
        return status if status.ready == 1 else None

    status = wait_until(running)
    assert (status.active, status.terminating, status.succeeded) == (1, 0, None)
    assert status.start_time is not None and status.conditions is None
    (pod,) = _pods(core_v1, namespace, "long")
    assert pod.metadata.finalizers == [TRACKING]


def test_a_failing_pod_is_replaced_until_the_backoff_limit_is_passed(
    core_v1: kubernetes.client.CoreV1Api,
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    batch_v1.create_namespaced_job(namespace, _job("flaky", ["false"], backoffLimit=1))

    job = wait_until(lambda: _finished(batch_v1, namespace, "flaky"))
    status = job.status
    assert (status.failed, status.succeeded, status.active, status.ready) == (2, None, None, 0)
    assert status.completion_time is None
    exceeded = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    assert _conditions(job) == [
        ("FailureTarget", "True", *exceeded),
        ("Failed", "True", *exceeded),
    ]
    pods = _pods(core_v1, namespace, "flaky")
    assert [p.status.phase for p in pods] == ["Failed", "Failed"]
    events = _job_events(core_v1, namespace, wait_until, 3)
    created = {f"Created pod: {p.metadata.name}" for p in pods}
    assert {e[3] for e in events[:2]} == created
    assert {e[:3] for e in events[:2]} == {("flaky", "Normal", "SuccessfulCreate")}
    assert events[2:] == [("flaky", "Warning", *exceeded, "job-controller")]


def test_a_pod_deleted_while_running_counts_as_failed_and_is_replaced(
    core_v1: kubernetes.client.CoreV1Api,
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    batch_v1.create_namespaced_job(namespace, _job("long", ["sleep", "600"]))
    (first,) = wait_until(lambda: _pods(core_v1, namespace, "long"))

    core_v1.delete_namespaced_pod(first.metadata.name, namespace)

    def replaced() -> Any:
        pods = _pods(core_v1, namespace, "long")
        return pods if [p.metadata.name for p in pods] != [first.metadata.name] and pods else None

    (second,) = wait_until(replaced)
    assert second.metadata.finalizers == [TRACKING]

    def counted() -> Any:
        status = batch_v1.read_namespaced_job("long", namespace).status
        return status if status.failed else None

    status = wait_until(counted)
    assert (status.failed, status.active, status.conditions) == (1, 1, None)


@pytest.mark.cluster_settings(programs=PROGRAMS)
def test_restarts_count_against_the_backoff_limit_when_pods_restart_on_failure(
    core_v1: kubernetes.client.CoreV1Api,
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    body = _process_job("crashing", "raise SystemExit(1)", restart="OnFailure", backoffLimit=1)
    batch_v1.create_namespaced_job(namespace, body)

    job = wait_until(lambda: _finished(batch_v1, namespace, "crashing"), timeout=20)
    assert [c[:3] for c in _conditions(job)] == [
        ("FailureTarget", "True", "BackoffLimitExceeded"),
        ("Failed", "True", "BackoffLimitExceeded"),
    ]
    assert job.status.failed == 1  # the one pod, deleted with the Job's failure
    wait_until(lambda: not _pods(core_v1, namespace, "crashing"), timeout=10)


def test_a_job_past_its_active_deadline_fails_and_its_pod_is_deleted(
    core_v1: kubernetes.client.CoreV1Api,
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    body = _job("slow", ["sleep", "600"], activeDeadlineSeconds=1)
    batch_v1.create_namespaced_job(namespace, body)
    (pod,) = wait_until(lambda: _pods(core_v1, namespace, "slow"))

    job = wait_until(lambda: _finished(batch_v1, namespace, "slow"), timeout=5)
    exceeded = ("DeadlineExceeded", "Job was active longer than specified deadline")
    assert _conditions(job) == [
        ("FailureTarget", "True", *exceeded),
        ("Failed", "True", *exceeded),
    ]
    assert (job.status.failed, job.status.active, job.status.terminating) == (1, None, 0)
    wait_until(lambda: not _pods(core_v1, namespace, "slow"))
    events = _job_events(core_v1, namespace, wait_until, 3)
    deleted = f"Deleted pod: {pod.metadata.name}"
    assert ("slow", "Normal", "SuccessfulDelete", deleted, "job-controller") in events
    assert ("slow", "Warning", *exceeded, "job-controller") in events


def test_deleting_a_job_in_the_background_deletes_its_pod(
    core_v1: kubernetes.client.CoreV1Api,
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    created = batch_v1.create_namespaced_job(namespace, _job("served", ["sleep", "600"]))
    wait_until(lambda: _pods(core_v1, namespace, "served"))

    answer = batch_v1.delete_namespaced_job("served", namespace, propagation_policy="Background")

    assert (answer["kind"], answer["status"]) == ("Status", "Success")
    assert answer["details"] == {
        "name": "served",
        "group": "batch",
        "kind": "jobs",
        "uid": created.metadata.uid,
    }
    assert not batch_v1.list_namespaced_job(namespace).items
    wait_until(lambda: not _pods(core_v1, namespace, "served"))


@pytest.mark.cluster_settings(pod_termination_seconds=1.0)
def test_deleting_a_job_in_the_foreground_keeps_it_until_its_pod_is_gone(
    core_v1: kubernetes.client.CoreV1Api,
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    batch_v1.create_namespaced_job(namespace, _job("served", ["sleep", "600"]))
    wait_until(lambda: batch_v1.read_namespaced_job("served", namespace).status.ready == 1)

    options = kubernetes.client.V1DeleteOptions(propagation_policy="Foreground")
    batch_v1.delete_namespaced_job("served", namespace, body=options)

    job = batch_v1.read_namespaced_job("served", namespace)
    assert job.metadata.deletion_timestamp is not None
    assert job.metadata.finalizers == ["foregroundDeletion"]
    wait_until(
        lambda: any(p.metadata.deletion_timestamp for p in _pods(core_v1, namespace, "served"))
    )
    assert batch_v1.read_namespaced_job("served", namespace).metadata.finalizers  # still held
    wait_until(lambda: not batch_v1.list_namespaced_job(namespace).items)
    assert not _pods(core_v1, namespace, "served")


def test_deleting_a_job_without_a_policy_orphans_its_pod_as_batch_v1_does(
    core_v1: kubernetes.client.CoreV1Api,
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    batch_v1.create_namespaced_job(namespace, _job("served", ["sleep", "600"]))
    (pod,) = wait_until(lambda: _pods(core_v1, namespace, "served"))

    answer = batch_v1.delete_namespaced_job("served", namespace)

    assert answer["metadata"]["finalizers"] == ["orphan"]  # the Job itself, being deleted
    wait_until(lambda: not batch_v1.list_namespaced_job(namespace).items)
    orphan = core_v1.read_namespaced_pod(pod.metadata.name, namespace)
    assert orphan.metadata.deletion_timestamp is None
    assert orphan.metadata.owner_references is None
    assert orphan.metadata.finalizers is None


def test_a_finished_job_is_deleted_with_its_pod_after_its_ttl(
    core_v1: kubernetes.client.CoreV1Api,
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
) -> None:
    body = _job("brief", ["true"], ttlSecondsAfterFinished=0)
    created = batch_v1.create_namespaced_job(namespace, body)

    def deleted(kind: str, _: Any) -> bool:
        return kind == "DELETED"

    events = _watch_jobs(batch_v1, namespace, created.metadata.resource_version, deleted)
    seen = [(kind, ([c[0] for c in _conditions(job)] or [None])[-1]) for kind, job in events]
    assert ("MODIFIED", "Complete") in seen
    assert seen[-1] == ("DELETED", "Complete")
    assert not _pods(core_v1, namespace, "brief")


def test_a_template_that_restarts_always_is_refused(
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
) -> None:
    required = ("FieldValueRequired", 'Required value: valid values: "OnFailure", "Never"')
    for restart in ("Always", None):  # unset is defaulted to Always, as for any pod
        body = _job("bad", ["true"])
        body["spec"]["template"]["spec"]["restartPolicy"] = restart
        with pytest.raises(ApiException) as raised:
            batch_v1.create_namespaced_job(namespace, body)
        assert _refusal(raised) == [("spec.template.spec.restartPolicy", *required)]
    with pytest.raises(ApiException) as raised:
        batch_v1.create_namespaced_job(namespace, _job("bad", ["true"], backoffLimit=-1))
    negative = ("FieldValueInvalid", "Invalid value: -1: must be greater than or equal to 0")
    assert _refusal(raised) == [("spec.backoffLimit", *negative)]
    assert not batch_v1.list_namespaced_job(namespace).items


def test_the_generated_selector_and_labels_are_the_api_servers(
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
) -> None:
    chosen = _job("chosen", ["true"], selector={"matchLabels": {"app": "x"}})
    chosen["spec"]["template"]["metadata"] = {"labels": {"app": "x"}}
    with pytest.raises(ApiException) as raised:
        batch_v1.create_namespaced_job(namespace, chosen)
    ((field, reason, message),) = _refusal(raised)
    assert (field, reason) == ("spec.selector", "FieldValueInvalid")
    assert message.endswith(": `selector` not auto-generated")

    renamed = _job("renamed", ["true"])
    renamed["spec"]["template"]["metadata"] = {"labels": {"job-name": "other"}}
    with pytest.raises(ApiException) as raised:
        batch_v1.create_namespaced_job(namespace, renamed)
    ((field, reason, message),) = _refusal(raised)
    assert (field, reason) == ("spec.template.metadata.labels[job-name]", "FieldValueInvalid")
    assert message.endswith(": must be 'renamed'")

    chosen["spec"]["manualSelector"] = True
    created = batch_v1.create_namespaced_job(namespace, chosen)
    assert created.spec.selector.match_labels == {"app": "x"}
    assert created.spec.template.metadata.labels == {"app": "x"}
    assert created.metadata.labels == {"app": "x"}


def test_a_jobs_template_cannot_change(
    batch_v1: kubernetes.client.BatchV1Api,
    namespace: str,
) -> None:
    batch_v1.create_namespaced_job(namespace, _job("fixed", ["sleep", "600"]))

    changed = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "x:2"}]}}}}
    with pytest.raises(ApiException) as raised:
        batch_v1.patch_namespaced_job("fixed", namespace, changed)
    ((field, reason, message),) = _refusal(raised)
    assert (field, reason) == ("spec.template", "FieldValueInvalid")
    assert message.endswith(": field is immutable")

    labels = {"metadata": {"labels": {"a": "b"}}}
    assert batch_v1.patch_namespaced_job("fixed", namespace, labels).metadata.labels["a"] == "b"


def test_discovery_lists_jobs_with_their_status(batch_v1: kubernetes.client.BatchV1Api) -> None:
    resources = {r.name: r for r in batch_v1.get_api_resources().resources}
    assert resources["jobs"].namespaced and resources["jobs"].kind == "Job"
    assert resources["jobs"].categories == ["all"]
    assert resources["jobs/status"].verbs == ["get", "patch", "update"]

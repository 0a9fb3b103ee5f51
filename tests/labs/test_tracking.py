"""How a lab record follows its pod outside operations: the URL a record gains on the way."""

from __future__ import annotations

from typing import Any

from app.models.lab import LabRecord, PodState
from app.models.workload import WorkloadStatus
from app.workloads.lab.tracking import assess

URL = "http://10.96.0.7:8888"


def record(status: WorkloadStatus, url: str | None = None) -> LabRecord:
    return LabRecord(
        username="wile",
        status=status,
        pod=PodState.PRESENT,
        options={},
        env={},
        uid=1000,
        gid=1000,
        groups=[],
        quotas={},
        internal_url=url,
        error=None,
    )


def pod(*, ready: bool) -> dict[str, Any]:
    flag = "True" if ready else "False"
    return {
        "metadata": {"name": "nb-wile-lab", "namespace": "nublado-wile"},
        "spec": {"nodeName": "node-1"},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": flag},
            ],
        },
    }


def test_a_starting_lab_that_becomes_ready_gets_its_url() -> None:
    asked: list[str] = []

    def reachable_at(username: str) -> str | None:
        asked.append(username)
        return URL

    assert assess(record(WorkloadStatus.STARTING), pod(ready=False), reachable_at) is None
    assert asked == []
    update = assess(record(WorkloadStatus.STARTING), pod(ready=True), reachable_at)
    assert update is not None
    assert (update.status, update.internal_url) == (WorkloadStatus.RUNNING, URL)
    assert asked == ["wile"]


def test_a_running_lab_without_a_url_gets_one_once_its_service_has_an_address() -> None:
    addresses: list[str | None] = [None, URL]

    def reachable_at(_username: str) -> str | None:
        return addresses.pop(0)

    assert assess(record(WorkloadStatus.RUNNING), pod(ready=True), reachable_at) is None
    update = assess(record(WorkloadStatus.RUNNING), pod(ready=True), reachable_at)
    assert update is not None and update.internal_url == URL


def test_a_running_lab_with_a_url_is_left_alone() -> None:
    def reachable_at(_username: str) -> str | None:
        raise AssertionError("a record with a URL needs no lookup")

    assert assess(record(WorkloadStatus.RUNNING, URL), pod(ready=True), reachable_at) is None

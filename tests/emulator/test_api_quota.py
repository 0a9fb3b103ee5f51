"""ResourceQuota admission of pods, as a real API server does it."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException


def _quota(namespace: str, hard: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "compute", "namespace": namespace}, "spec": {"hard": hard}}


def _pod(name: str, cpu: str, memory: str) -> dict[str, Any]:
    resources = {
        "limits": {"cpu": cpu, "memory": memory},
        "requests": {"cpu": cpu, "memory": memory},
    }
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]},
    }


def test_pods_within_the_quota_are_admitted_and_the_rest_refused(
    core_v1: k8s.CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_resource_quota(
        namespace, _quota(namespace, {"limits.cpu": "2", "limits.memory": "4Gi", "pods": "3"})
    )
    core_v1.create_namespaced_pod(namespace, _pod("one", "1", "2Gi"))
    core_v1.create_namespaced_pod(namespace, _pod("two", "500m", "1Gi"))
    with pytest.raises(ApiException) as info:
        core_v1.create_namespaced_pod(namespace, _pod("three", "1", "512Mi"))
    assert info.value.status == 403
    assert "exceeded quota: compute, requested: limits.cpu=1, used: limits.cpu=1.5" in str(
        info.value.body
    )
    assert "limited: limits.cpu=2" in str(info.value.body)


def test_a_quota_needs_the_resource_specified(core_v1: k8s.CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_resource_quota(namespace, _quota(namespace, {"limits.memory": "1Gi"}))
    bare = {
        "metadata": {"name": "bare"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    with pytest.raises(ApiException) as info:
        core_v1.create_namespaced_pod(namespace, bare)
    assert info.value.status == 403
    assert "failed quota: compute: must specify limits.memory" in str(info.value.body)


def test_deleted_pods_free_their_share(core_v1: k8s.CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_resource_quota(namespace, _quota(namespace, {"pods": "1"}))
    core_v1.create_namespaced_pod(namespace, _pod("first", "100m", "64Mi"))
    with pytest.raises(ApiException):
        core_v1.create_namespaced_pod(namespace, _pod("second", "100m", "64Mi"))
    core_v1.delete_namespaced_pod("first", namespace, grace_period_seconds=0)
    core_v1.create_namespaced_pod(namespace, _pod("second", "100m", "64Mi"))

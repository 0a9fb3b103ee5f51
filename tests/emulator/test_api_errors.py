"""Error codes and Status bodies: 404, 409, 403, 400 and 422 with field causes."""

from __future__ import annotations

import base64
import json
from typing import Any

import kubernetes.client
import pytest
import requests
from kubernetes.client import AppsV1Api, CoreV1Api

from devstack.kube import KubernetesEmulator


def _status(error: kubernetes.client.ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"
    assert body["status"] == "Failure"
    assert body["code"] == error.status
    return body


def _rejected(call: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(kubernetes.client.ApiException) as caught:
        call(*args)
    return _status(caught.value)


def _pod(name: str = "p", **spec: Any) -> dict[str, Any]:
    containers = spec.pop("containers", [{"name": "main", "image": "lab:1"}])
    return {"metadata": {"name": name}, "spec": {"containers": containers, **spec}}


def _causes(status: dict[str, Any]) -> list[str]:
    return [c["field"] for c in status["details"]["causes"]]


def test_not_found(core_v1: CoreV1Api, namespace: str) -> None:
    status = _rejected(core_v1.read_namespaced_pod, "ghost", namespace)
    assert status["reason"] == "NotFound"
    assert status["message"] == 'pods "ghost" not found'
    assert status["details"] == {"name": "ghost", "kind": "pods"}


def test_not_found_in_a_group_names_the_group(apps_v1: AppsV1Api, namespace: str) -> None:
    status = _rejected(apps_v1.read_namespaced_daemon_set, "ghost", namespace)
    assert status["message"] == 'daemonsets.apps "ghost" not found'
    assert status["details"]["group"] == "apps"


def test_already_exists(core_v1: CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "dup"}})
    status = _rejected(
        core_v1.create_namespaced_config_map, namespace, {"metadata": {"name": "dup"}}
    )
    assert status["code"] == 409 and status["reason"] == "AlreadyExists"


def test_create_in_missing_namespace_is_404(core_v1: CoreV1Api) -> None:
    status = _rejected(core_v1.create_namespaced_config_map, "nowhere", {"metadata": {"name": "x"}})
    assert status["code"] == 404
    assert status["message"] == 'namespaces "nowhere" not found'


@pytest.mark.cluster_settings(namespace_termination_seconds=60)
def test_create_in_terminating_namespace_is_403(core_v1: CoreV1Api, namespace: str) -> None:
    core_v1.delete_namespace(namespace)
    status = _rejected(
        core_v1.create_namespaced_config_map, namespace, {"metadata": {"name": "late"}}
    )
    assert status["code"] == 403 and status["reason"] == "Forbidden"
    assert status["message"] == (
        'configmaps "late" is forbidden: unable to create new content in namespace test '
        "because it is being terminated"
    )


def test_malformed_body_is_400(emulator: KubernetesEmulator, namespace: str) -> None:
    url = f"{emulator.url}/api/v1/namespaces/{namespace}/configmaps"
    response = requests.post(
        url, data="{not json", headers={"Content-Type": "application/json"}, timeout=5
    )
    assert response.status_code == 400
    assert response.json()["reason"] == "BadRequest"
    response = requests.post(url, json=["a", "list"], timeout=5)
    assert response.status_code == 400


def test_kind_and_namespace_must_match_the_url(
    emulator: KubernetesEmulator, namespace: str
) -> None:
    url = f"{emulator.url}/api/v1/namespaces/{namespace}/configmaps"
    wrong_kind = requests.post(url, json={"kind": "Secret", "metadata": {"name": "a"}}, timeout=5)
    assert wrong_kind.status_code == 400
    wrong_ns = requests.post(url, json={"metadata": {"name": "a", "namespace": "other"}}, timeout=5)
    assert wrong_ns.status_code == 400


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("Upper", "metadata.name"),
        ("under_score", "metadata.name"),
        ("-leading", "metadata.name"),
        ("a" * 254, "metadata.name"),
    ],
)
def test_bad_object_names_are_422(
    core_v1: CoreV1Api, namespace: str, name: str, field: str
) -> None:
    status = _rejected(
        core_v1.create_namespaced_config_map, namespace, {"metadata": {"name": name}}
    )
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert _causes(status) == [field]


def test_label_name_kinds_reject_dots_and_long_names(core_v1: CoreV1Api, namespace: str) -> None:
    # Namespaces and services need DNS labels: no dots, at most 63 characters.
    assert _rejected(core_v1.create_namespace, {"metadata": {"name": "a.b"}})["code"] == 422
    assert _rejected(core_v1.create_namespace, {"metadata": {"name": "n" * 64}})["code"] == 422
    assert core_v1.create_namespace({"metadata": {"name": "n" * 63}}).metadata.name == "n" * 63
    service = {"metadata": {"name": "a.b"}, "spec": {"ports": [{"port": 1}]}}
    assert _rejected(core_v1.create_namespaced_service, namespace, service)["code"] == 422
    # ConfigMaps take subdomains, dots included.
    assert core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "a.b"}})


def test_bad_generate_name_is_422(core_v1: CoreV1Api, namespace: str) -> None:
    status = _rejected(
        core_v1.create_namespaced_config_map, namespace, {"metadata": {"generateName": "Bad-"}}
    )
    assert _causes(status) == ["metadata.generateName"]


@pytest.mark.parametrize(
    "labels",
    [
        {"bad key": "v"},
        {"key": "bad value!"},
        {"key": "v" * 64},
        {"-x": "v"},
        {"UPPER.prefix/x": "v"},
    ],
)
def test_bad_labels_are_422(core_v1: CoreV1Api, namespace: str, labels: dict[str, str]) -> None:
    status = _rejected(
        core_v1.create_namespaced_config_map,
        namespace,
        {"metadata": {"name": "l", "labels": labels}},
    )
    assert status["code"] == 422
    assert all(f.startswith("metadata.labels") for f in _causes(status))


def test_good_labels_pass(core_v1: CoreV1Api, namespace: str) -> None:
    labels = {"argocd.argoproj.io/instance": "nublado-users", "a_b.c-d": "", "x": "Y.z-1_2"}
    created = core_v1.create_namespaced_config_map(
        namespace, {"metadata": {"name": "l", "labels": labels}}
    )
    assert created.metadata.labels == labels


@pytest.mark.parametrize("quantity", ["1.5.5", "lots", "1Gb", "10 Mi", "-1"])
def test_bad_container_quantities_are_422(
    core_v1: CoreV1Api, namespace: str, quantity: str
) -> None:
    pod = _pod(
        containers=[{"name": "c", "image": "i", "resources": {"limits": {"memory": quantity}}}]
    )
    status = _rejected(core_v1.create_namespaced_pod, namespace, pod)
    assert _causes(status) == ["spec.containers[0].resources.limits[memory]"]


def test_good_quantities_pass(core_v1: CoreV1Api, namespace: str) -> None:
    resources = {
        "limits": {"cpu": "2", "memory": "4Gi"},
        "requests": {"cpu": "100m", "memory": "2e3"},
    }
    pod = _pod(containers=[{"name": "c", "image": "i", "resources": resources}])
    created = core_v1.create_namespaced_pod(namespace, pod)
    assert created.spec.containers[0].resources.requests == {"cpu": "100m", "memory": "2e3"}


def test_request_above_limit_is_422(core_v1: CoreV1Api, namespace: str) -> None:
    resources = {"limits": {"cpu": "1"}, "requests": {"cpu": "1500m"}}
    pod = _pod(containers=[{"name": "c", "image": "i", "resources": resources}])
    status = _rejected(core_v1.create_namespaced_pod, namespace, pod)
    assert _causes(status) == ["spec.containers[0].resources.requests[cpu]"]


def test_bad_quota_quantity_is_422(core_v1: CoreV1Api, namespace: str) -> None:
    quota = {"metadata": {"name": "q"}, "spec": {"hard": {"limits.memory": "many"}}}
    status = _rejected(core_v1.create_namespaced_resource_quota, namespace, quota)
    assert _causes(status) == ["spec.hard[limits.memory]"]


def test_duplicate_container_names_are_422(core_v1: CoreV1Api, namespace: str) -> None:
    pod = _pod(
        containers=[{"name": "c", "image": "i"}],
        initContainers=[{"name": "c", "image": "i"}],
    )
    status = _rejected(core_v1.create_namespaced_pod, namespace, pod)
    assert status["details"]["causes"][0]["reason"] == "FieldValueDuplicate"
    assert _causes(status) == ["spec.containers[0].name"]


def test_container_needs_name_and_image(emulator: KubernetesEmulator, namespace: str) -> None:
    # Sent raw: the client's own models already insist on a container name.
    url = f"{emulator.url}/api/v1/namespaces/{namespace}/pods"
    response = requests.post(url, json=_pod(containers=[{"name": "c"}]), timeout=5)
    assert response.status_code == 422
    assert [c["field"] for c in response.json()["details"]["causes"]] == [
        "spec.containers[0].image"
    ]
    response = requests.post(url, json=_pod(containers=[{"image": "i"}]), timeout=5)
    assert response.status_code == 422
    assert "spec.containers[0]" in response.json()["details"]["causes"][0]["field"]


def test_schema_type_errors_are_422(emulator: KubernetesEmulator, namespace: str) -> None:
    url = f"{emulator.url}/api/v1/namespaces/{namespace}/pods"
    pod = _pod(containers=[{"name": "c", "image": "i", "ports": [{"containerPort": "eighty"}]}])
    response = requests.post(url, json=pod, timeout=5)
    assert response.status_code == 422
    status = response.json()
    assert status["details"]["causes"][0]["field"] == "spec.containers[0].ports[0].containerPort"
    assert status["message"].startswith(
        'Pod "p" is invalid: spec.containers[0].ports[0].containerPort'
    )


def test_unknown_fields_are_rejected_in_strict_mode_only(
    emulator: KubernetesEmulator, namespace: str
) -> None:
    url = f"{emulator.url}/api/v1/namespaces/{namespace}/configmaps"
    body = {"metadata": {"name": "strict"}, "bogus": 1}
    strict = requests.post(url, json=body, params={"fieldValidation": "Strict"}, timeout=5)
    assert strict.status_code == 422
    lenient = requests.post(url, json=body, timeout=5)
    assert lenient.status_code == 201


def test_validation_surfaces_as_api_exception(core_v1: CoreV1Api, namespace: str) -> None:
    with pytest.raises(kubernetes.client.exceptions.ApiException) as caught:
        core_v1.create_namespaced_pod(namespace, _pod(name="Bad_Name"))
    assert caught.value.status == 422


def test_configmaps_and_secrets_over_one_mib_are_422(core_v1: CoreV1Api, namespace: str) -> None:
    """As kube-apiserver refuses them: a lab whose env ConfigMap or Secret grew past the
    limit must fail here, not only in a real cluster."""
    half = "x" * (512 * 1024)
    config_map = {"metadata": {"name": "big"}, "data": {"a": half, "b": half, "c": "x"}}
    status = _rejected(core_v1.create_namespaced_config_map, namespace, config_map)
    assert status["code"] == 422
    assert "must have at most 1048576 bytes" in status["message"]
    encoded = base64.b64encode(b"x" * (700 * 1024)).decode()
    secret = {"metadata": {"name": "big"}, "data": {"a": encoded}, "stringData": {"b": half}}
    status = _rejected(core_v1.create_namespaced_secret, namespace, secret)
    assert status["code"] == 422
    # Exactly at the limit is accepted; the limit counts decoded bytes, not base64.
    at_limit = base64.b64encode(b"x" * (1024 * 1024)).decode()
    accepted = {"metadata": {"name": "at-limit"}, "data": {"a": at_limit}}
    core_v1.create_namespaced_secret(namespace, accepted)
    core_v1.create_namespaced_config_map(
        namespace, {"metadata": {"name": "at-limit"}, "data": {"a": "x" * (1024 * 1024)}}
    )


def test_a_request_body_over_three_mib_is_413(core_v1: CoreV1Api, namespace: str) -> None:
    big = {"metadata": {"name": "huge"}, "data": {str(i): "x" * 1024 * 1024 for i in range(4)}}
    status = _rejected(core_v1.create_namespaced_config_map, namespace, big)
    assert status["code"] == 413
    assert status["reason"] == "RequestEntityTooLarge"

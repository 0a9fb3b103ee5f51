"""Who may do what: service-account tokens from the TokenRequest API, the RBAC the API
enforces on them, and the access reviews that answer from it (``kubectl auth can-i``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest
import requests
from kubernetes.client.rest import ApiException

from devstack.kube import KubernetesEmulator

RBAC_GROUP = "rbac.authorization.k8s.io"


def _token(core_v1: kubernetes.client.CoreV1Api, namespace: str, name: str) -> str:
    request = core_v1.create_namespaced_service_account_token(name, namespace, {"spec": {}})
    token: str = request.status.token
    return token


@pytest.fixture
def as_reader(
    emulator: KubernetesEmulator, core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> Iterator[kubernetes.client.ApiClient]:
    """A client presenting the token of the ServiceAccount ``reader``."""
    core_v1.create_namespaced_service_account(namespace, {"metadata": {"name": "reader"}})
    configuration = emulator.client_configuration()
    configuration.api_key = {"authorization": "Bearer " + _token(core_v1, namespace, "reader")}
    client = kubernetes.client.ApiClient(configuration)
    yield client
    client.close()


def _review(client: kubernetes.client.ApiClient, **attributes: str) -> Any:
    api = kubernetes.client.AuthorizationV1Api(client)
    body = {"spec": {"resourceAttributes": attributes}}
    return api.create_self_subject_access_review(body).status


def test_a_cluster_role_bound_to_a_group_grants_named_objects_only(
    api_client: kubernetes.client.ApiClient,
    as_reader: kubernetes.client.ApiClient,
    core_v1: kubernetes.client.CoreV1Api,
    namespace: str,
) -> None:
    rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
    rules = [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["a"]},
        {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["get"]},
    ]
    rbac.create_cluster_role({"metadata": {"name": "narrow"}, "rules": rules})
    group = f"system:serviceaccounts:{namespace}"
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "everyone-narrow"},
            "subjects": [{"kind": "Group", "name": group, "apiGroup": RBAC_GROUP}],
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "narrow"},
        }
    )
    allowed = _review(as_reader, verb="get", resource="configmaps", name="a", namespace=namespace)
    assert (allowed.allowed, allowed.reason) == (
        True,
        f'RBAC: allowed by ClusterRoleBinding "everyone-narrow" of ClusterRole "narrow" to '
        f'Group "{group}"',
    )
    assert not _review(as_reader, verb="get", resource="configmaps", name="b").allowed
    assert not _review(as_reader, verb="list", resource="configmaps").allowed
    status = _review(
        as_reader, verb="get", group="apps", resource="deployments", subresource="status"
    )
    assert status.allowed

    reader_core = kubernetes.client.CoreV1Api(as_reader)
    core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": "b"}})
    assert reader_core.read_namespaced_config_map("a", namespace).metadata.name == "a"
    with pytest.raises(ApiException) as denied:
        reader_core.read_namespaced_config_map("b", namespace)
    assert denied.value.status == 403
    with pytest.raises(ApiException) as denied:
        reader_core.list_namespaced_config_map(namespace, watch=True, timeout_seconds=1)
    assert denied.value.status == 403
    assert "cannot watch resource" in denied.value.body


def test_token_requests_and_reviews_are_created_only(
    emulator: KubernetesEmulator, core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_service_account(namespace, {"metadata": {"name": "robot"}})
    with pytest.raises(ApiException) as short:
        core_v1.create_namespaced_service_account_token(
            "robot", namespace, {"spec": {"expirationSeconds": 60}}
        )
    assert short.value.status == 422
    with pytest.raises(ApiException) as missing:
        _token(core_v1, namespace, "nobody")
    assert missing.value.status == 404

    reviews = f"{emulator.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    assert requests.get(reviews, timeout=5).status_code == 405
    listed = requests.get(f"{emulator.url}/apis/authorization.k8s.io/v1", timeout=5).json()
    assert {r["name"]: r["verbs"] for r in listed["resources"]} == {
        "selfsubjectaccessreviews": ["create"],
        "selfsubjectrulesreviews": ["create"],
    }
    core = requests.get(f"{emulator.url}/api/v1", timeout=5).json()["resources"]
    assert {"name": "serviceaccounts/token", "verbs": ["create"]}.items() <= next(
        r for r in core if r["name"] == "serviceaccounts/token"
    ).items()

    # A protobuf body of a kind the API does not read that way.
    namespace_body = b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x00"
    answer = requests.post(
        f"{emulator.url}/api/v1/namespaces",
        data=namespace_body,
        headers={"Content-Type": "application/vnd.kubernetes.protobuf"},
        timeout=5,
    )
    assert answer.status_code == 415

"""Gafaelfawr's simulated operator: a GafaelfawrIngress becomes its Ingress and follows it."""

from __future__ import annotations

import json
from typing import Any

import kubernetes.client
import pytest
import requests

from devstack.kube import KubernetesEmulator
from devstack.kube.crds import crd
from tests.emulator.conftest import WaitUntil

GAFAELFAWR = "http://gafaelfawr.test:8080"
GROUP, VERSION, PLURAL = "gafaelfawr.lsst.io", "v1alpha1", "gafaelfawringresses"
NGINX = "nginx.ingress.kubernetes.io/"
LIFTED = (
    "Authorization,Cookie,X-Auth-Request-Email,X-Auth-Request-Service,"
    "X-Auth-Request-Token,X-Auth-Request-User"
)
pytestmark = pytest.mark.cluster_settings(gafaelfawr_url=GAFAELFAWR)


@pytest.fixture(autouse=True)
def served(
    emulator: KubernetesEmulator,
    extensions: kubernetes.client.ApiextensionsV1Api,
    wait_until: WaitUntil,
) -> None:
    extensions.create_custom_resource_definition(crd(PLURAL))
    wait_until(lambda: emulator.served.by_plural(PLURAL))


def _rule(path: str = "/apps/a1/", host: str | None = None) -> dict[str, Any]:
    backend = {"service": {"name": "app-a1", "port": {"number": 8080}}}
    rule: dict[str, Any] = {
        "http": {"paths": [{"path": path, "pathType": "Prefix", "backend": backend}]}
    }
    if host:
        rule["host"] = host
    return rule


def _body(config: dict[str, Any], name: str = "app-a1", **template: Any) -> dict[str, Any]:
    meta = {"name": name, **template.pop("metadata", {})}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GafaelfawrIngress",
        "metadata": {"name": "app-a1"},
        "config": config,
        "template": {"metadata": meta, "spec": {"rules": [_rule()], **template}},
    }


def _ingress(
    networking_v1: kubernetes.client.NetworkingV1Api, namespace: str, name: str = "app-a1"
) -> Any:
    items = networking_v1.list_namespaced_ingress(namespace).items
    return next((i for i in items if i.metadata.name == name), None)


def _status(
    objects: kubernetes.client.CustomObjectsApi, namespace: str, reason: str | None = None
) -> dict[str, Any]:
    """The object's ``status.create``; empty until it says ``reason``, when one is given."""
    obj = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "app-a1")
    create = dict((obj.get("status") or {}).get("create") or {})
    return create if reason is None or create.get("reason") == reason else {}


def test_a_gafaelfawringress_becomes_an_ingress_with_gafaelfawrs_annotations(
    objects: kubernetes.client.CustomObjectsApi,
    networking_v1: kubernetes.client.NetworkingV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    config = {
        "scopes": {"all": ["app:g-science", "read:image"]},
        "service": "apps",
        "username": "rachel",
        "loginRedirect": True,
        "authCacheDuration": "5m",
    }
    own = {
        NGINX + "configuration-snippet": "add_header X-Own yes;",
        NGINX + "auth-method": "POST",
        NGINX + "proxy-body-size": "10m",
    }
    tls = [{"hosts": ["data.example.org"], "secretName": "tls"}]
    body = _body(config, metadata={"labels": {"app": "a1"}, "annotations": own}, tls=tls)
    created = objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    ingress = wait_until(lambda: _ingress(networking_v1, namespace))

    snippet = ingress.metadata.annotations[NGINX + "configuration-snippet"]
    assert snippet.startswith("add_header X-Own yes;\nauth_request_set ")
    assert "auth_request_set $auth_www_authenticate $upstream_http_www_authenticate;" in snippet
    assert snippet.endswith("error_page 403 = @autherror;\n")
    assert {k: v for k, v in ingress.metadata.annotations.items() if "snippet" not in k} == {
        NGINX + "auth-method": "GET",
        NGINX + "proxy-body-size": "10m",
        NGINX + "auth-response-headers": LIFTED,
        NGINX + "auth-url": (
            f"{GAFAELFAWR}/ingress/auth?scope=app:g-science&scope=read:image"
            "&service=apps&username=rachel"
        ),
        NGINX + "auth-signin": f"{GAFAELFAWR}/login",
        NGINX + "auth-cache-key": "$request_method$http_cookie$http_authorization",
        NGINX + "auth-cache-duration": "200 202 401 5m",
    }
    assert ingress.metadata.labels == {"app": "a1", "app.kubernetes.io/managed-by": "Gafaelfawr"}
    [owner] = ingress.metadata.owner_references
    assert (owner.api_version, owner.kind, owner.name, owner.uid, owner.controller) == (
        f"{GROUP}/{VERSION}",
        "GafaelfawrIngress",
        "app-a1",
        created["metadata"]["uid"],
        True,
    )
    assert ingress.spec.ingress_class_name == "nginx"
    assert ingress.spec.rules[0].http.paths[0].path == "/apps/a1/"
    assert ingress.spec.rules[0].http.paths[0].backend.service.port.number == 8080
    assert ingress.spec.tls[0].secret_name == "tls"
    status = wait_until(lambda: _status(objects, namespace))
    assert (status["status"], status["reason"], status["type"]) == (
        "True",
        "Created",
        "ResourceCreated",
    )
    assert (status["message"], status["observedGeneration"]) == ("Ingress was created", 1)


@pytest.mark.parametrize(
    ("config", "auth_url"),
    [
        ({"scopes": {"anonymous": True}}, "/ingress/anonymous"),
        (
            {"scopes": {"any": ["exec:notebook", "read:image"]}, "service": "apps"},
            "/ingress/auth?scope=exec:notebook&scope=read:image&satisfy=any&service=apps",
        ),
        (
            {"scopes": {"all": ["exec:notebook"]}, "delegate": {"notebook": {}}},
            "/ingress/auth?notebook=true&scope=exec:notebook",
        ),
        (
            {
                "scopes": {"all": ["read:image"]},
                "authType": "basic",
                "delegate": {
                    "internal": {"service": "portal", "scopes": ["read:image"]},
                    "minimumLifetime": 600,
                    "useAuthorization": True,
                },
            },
            "/ingress/auth?auth_type=basic&delegate_to=portal&delegate_scope=read:image"
            "&minimum_lifetime=600&use_authorization=true&scope=read:image",
        ),
        (
            {
                "scopes": {"all": ["write:files"]},
                "username": "rachel",
                "authType": "basic",
                "allowOptions": True,
                "loginRedirect": False,
            },
            "/ingress/auth?allow_options=true&auth_type=basic&scope=write:files&username=rachel",
        ),
    ],
)
def test_the_auth_url_says_what_the_config_asks(
    objects: kubernetes.client.CustomObjectsApi,
    networking_v1: kubernetes.client.NetworkingV1Api,
    namespace: str,
    wait_until: WaitUntil,
    config: dict[str, Any],
    auth_url: str,
) -> None:
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _body(config))
    ingress = wait_until(lambda: _ingress(networking_v1, namespace))
    annotations = ingress.metadata.annotations
    assert annotations[NGINX + "auth-url"] == GAFAELFAWR + auth_url
    anonymous = auth_url == "/ingress/anonymous"
    assert (NGINX + "configuration-snippet" in annotations) is not anonymous
    assert annotations[NGINX + "auth-response-headers"] == LIFTED


def test_the_ingress_follows_changes_and_goes_with_its_object(
    objects: kubernetes.client.CustomObjectsApi,
    networking_v1: kubernetes.client.NetworkingV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    body = _body({"scopes": {"all": ["app:staff"]}})
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    wait_until(lambda: _status(objects, namespace, reason="Created"))

    patch = {"config": {"scopes": {"all": None, "any": ["exec:notebook"]}}}
    patch["template"] = {"spec": {"rules": [_rule("/apps/moved/", host="data.example.org")]}}
    objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "app-a1", patch)

    def moved() -> Any:
        ingress = _ingress(networking_v1, namespace)
        return ingress if ingress.spec.rules[0].http.paths[0].path == "/apps/moved/" else None

    ingress = wait_until(moved)
    assert ingress.spec.rules[0].host == "data.example.org"
    assert ingress.metadata.annotations[NGINX + "auth-url"].endswith(
        "?scope=exec:notebook&satisfy=any"
    )
    status = wait_until(lambda: _status(objects, namespace, reason="Updated"))
    assert (status["message"], status["observedGeneration"]) == ("Ingress was updated", 2)

    renamed = {"template": {"metadata": {"name": "app-renamed"}}}
    objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "app-a1", renamed)
    wait_until(lambda: _ingress(networking_v1, namespace, "app-renamed"))
    wait_until(lambda: _ingress(networking_v1, namespace) is None)

    objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "app-a1")
    wait_until(lambda: not networking_v1.list_namespaced_ingress(namespace).items)


def test_an_ingress_of_that_name_is_taken_over(
    objects: kubernetes.client.CustomObjectsApi,
    networking_v1: kubernetes.client.NetworkingV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    """As Gafaelfawr replaces an existing Ingress of the template's name, making it its own."""
    plain = {"metadata": {"name": "app-a1"}, "spec": {"rules": [_rule("/old/")]}}
    networking_v1.create_namespaced_ingress(namespace, plain)
    body = _body({"scopes": {"anonymous": True}})
    created = objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    def taken() -> Any:
        ingress = _ingress(networking_v1, namespace)
        owners = ingress.metadata.owner_references or []
        return ingress if [o.uid for o in owners] == [created["metadata"]["uid"]] else None

    ingress = wait_until(taken)
    assert ingress.spec.rules[0].http.paths[0].path == "/apps/a1/"
    assert wait_until(lambda: _status(objects, namespace).get("reason")) == "Updated"


def test_a_template_without_a_name_fails_in_the_status(
    objects: kubernetes.client.CustomObjectsApi,
    networking_v1: kubernetes.client.NetworkingV1Api,
    namespace: str,
    wait_until: WaitUntil,
) -> None:
    body = _body({"scopes": {"anonymous": True}})
    del body["template"]["metadata"]["name"]
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    status = wait_until(lambda: _status(objects, namespace))
    assert (status["status"], status["reason"]) == ("False", "Failed")
    assert not networking_v1.list_namespaced_ingress(namespace).items


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"scopes": {"any": ["a"], "all": ["b"]}}, "config.scopes"),
        ({"scopes": {"anonymous": False}}, "config.scopes"),
        ({"scopes": {"anonymous": True}, "baseUrl": "http://127.0.0.1:8080"}, "config.baseUrl"),
        ({"scopes": {"all": ["a"]}, "authType": "digest"}, "config.authType"),
        ({"scopes": {"all": ["a"]}, "delegate": {"useAuthorization": True}}, "config.delegate"),
    ],
)
def test_the_crd_refuses_what_gafaelfawrs_refuses(
    objects: kubernetes.client.CustomObjectsApi,
    namespace: str,
    config: dict[str, Any],
    field: str,
) -> None:
    with pytest.raises(kubernetes.client.ApiException) as refused:
        objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _body(config))
    assert refused.value.status == 422
    causes = json.loads(refused.value.body)["details"]["causes"]
    assert field in {c["field"] for c in causes}


def test_ingresses_are_served_with_their_status_subresource(
    emulator: KubernetesEmulator, networking_v1: kubernetes.client.NetworkingV1Api, namespace: str
) -> None:
    body = {"metadata": {"name": "web"}, "spec": {"rules": [_rule("/web/")]}}
    networking_v1.create_namespaced_ingress(namespace, body)
    status = {"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}}}
    networking_v1.patch_namespaced_ingress_status("web", namespace, status)
    # The main resource cannot change the status; the status subresource changes only it.
    networking_v1.patch_namespaced_ingress("web", namespace, {"status": {"loadBalancer": {}}})
    read = networking_v1.read_namespaced_ingress("web", namespace)
    assert read.status.load_balancer.ingress[0].ip == "127.0.0.1"
    # Checked against the official schema (the client would refuse to send this itself).
    bad = {"metadata": {"name": "bad"}, "spec": {"rules": [_rule("/bad/")]}}
    del bad["spec"]["rules"][0]["http"]["paths"][0]["pathType"]
    url = f"{emulator.url}/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses"
    refused = requests.post(url, json=bad, timeout=5)
    assert refused.status_code == 422
    assert "pathType" in refused.json()["message"]

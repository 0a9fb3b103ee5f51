"""The chart's part in users' file servers: the ``config.fileserver`` values (off by default,
passed to the service as they are), the namespace the chart makes for them, the Role the
service gets there, and the ingress rules of the file-server routes with their scopes."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.chart.test_chart import (
    FILESERVER_ROUTE_SCOPES as ROUTE_SCOPES,
)
from tests.chart.test_chart import KUBE_VERSIONS, NAMESPACE, _ingress_for, _one, _render

ENABLED: dict[str, Any] = {"config": {"fileserver": {"enabled": True}}}

CONTRACT_DEFAULTS: dict[str, Any] = {
    "enabled": False,
    "namespace": "fileservers",
    "image": "docker.io/lsstsqre/fileserver:1.0",
    "pullPolicy": "IfNotPresent",
    "idleTimeout": 3600,
    "creationTimeout": 120,
    "deleteTimeout": 60,
    "port": 8000,
    "pathPrefix": "/files",
    "scope": "write:files",
    "baseUrl": "https://data.example.org",
    "ingressNamespaces": ["ingress-nginx"],
    "volumeMounts": [],
    "resources": {
        "requests": {"cpu": 0.1, "memory": "128Mi"},
        "limits": {"cpu": 1, "memory": "1Gi"},
    },
    "nodeSelector": {},
    "tolerations": [],
}
"""The ``fileserver`` section's defaults as the service's contract states them (no mounts until
the deployment names its volumes)."""

ROLE_RULES = {
    ("batch", "jobs", "create"),
    ("batch", "jobs", "get"),
    ("batch", "jobs", "list"),
    ("batch", "jobs", "watch"),
    ("batch", "jobs", "delete"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "services", "create"),
    ("", "services", "get"),
    ("", "services", "update"),
    ("", "services", "delete"),
    ("networking.k8s.io", "networkpolicies", "create"),
    ("networking.k8s.io", "networkpolicies", "get"),
    ("networking.k8s.io", "networkpolicies", "update"),
    ("networking.k8s.io", "networkpolicies", "delete"),
    ("gafaelfawr.lsst.io", "gafaelfawringresses", "create"),
    ("gafaelfawr.lsst.io", "gafaelfawringresses", "get"),
    ("gafaelfawr.lsst.io", "gafaelfawringresses", "update"),
    ("gafaelfawr.lsst.io", "gafaelfawringresses", "delete"),
    ("networking.k8s.io", "ingresses", "get"),
}
"""What the file-server kind does in its namespace, and all the Role grants there."""

SERVERS_PATHS = ("/files/rachel", "/files/rachel/", "/files/rachel/home/notes.txt", "/files/")
"""Paths of the users' servers themselves, which the ingress the service makes for each one
routes: none of the chart's rules may take them."""


def _config(documents: list[dict[str, Any]]) -> Any:
    return yaml.safe_load(_one(documents, "ConfigMap", "lab-spawner")["data"]["config.yaml"])


def _fileserver_objects(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        d
        for d in documents
        if d["kind"] == "Namespace"
        or d["metadata"].get("namespace") == "fileservers"
        or "file" in d["metadata"]["name"]
    ]


def test_off_by_default_with_the_contracts_defaults() -> None:
    documents = _render()
    assert _config(documents)["fileserver"] == CONTRACT_DEFAULTS
    assert _fileserver_objects(documents) == []
    for _, path in ROUTE_SCOPES:
        assert _ingress_for(documents, path) == [], path


def test_the_section_reaches_the_service_as_given() -> None:
    section = {
        "enabled": True,
        "idleTimeout": 600,
        "baseUrl": "https://rsp.example.org",
        "ingressNamespaces": ["ingress-nginx", "ingress-internal"],
        "volumeMounts": [
            {"volumeName": "home", "mountPath": "/home", "readOnly": False},
            {"volumeName": "datasets", "mountPath": "/datasets/rubin", "readOnly": True},
        ],
        "nodeSelector": {"lab-spawner.jupyter.org/node-pool": "users"},
    }
    rendered = _config(_render({"config": {"fileserver": section}}))["fileserver"]
    assert rendered == {**CONTRACT_DEFAULTS, **section}


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_every_file_server_object_is_valid(kube_version: str) -> None:
    documents = _render(ENABLED, kube_version=kube_version[:4])
    found = _fileserver_objects(documents)
    assert sorted(d["kind"] for d in found) == sorted(
        ["Namespace", "Role", "RoleBinding"] + ["GafaelfawrIngress"] * 4
    )
    for doc in found:
        if doc["kind"] == "GafaelfawrIngress":
            ingress = {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {**doc["template"]["metadata"], "namespace": NAMESPACE},
                "spec": doc["template"]["spec"],
            }
            kubernetes_validate.validate(ingress, kube_version, strict=True)
        else:
            kubernetes_validate.validate(doc, kube_version, strict=True)


def test_the_chart_makes_the_namespace_and_grants_the_kinds_calls_there() -> None:
    documents = _render(ENABLED)
    namespace = _one(documents, "Namespace")
    assert namespace["metadata"]["name"] == "fileservers"
    assert namespace["metadata"]["labels"]["app.kubernetes.io/part-of"] == "lab-spawner"

    role = _one(documents, "Role", "-fileservers")
    assert role["metadata"]["namespace"] == "fileservers"
    granted = [
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    ]
    assert len(granted) == len(set(granted))
    assert set(granted) == ROLE_RULES
    assert all(set(rule) == {"apiGroups", "resources", "verbs"} for rule in role["rules"])

    binding = _one(documents, "RoleBinding", "-fileservers")
    assert binding["metadata"]["namespace"] == "fileservers"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    account = _one(documents, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
    ]
    # The release's own Role and ClusterRole are as they were.
    assert _one(documents, "Role", "lab-spawner")["metadata"]["namespace"] == NAMESPACE


def test_another_namespace_moves_the_namespace_and_the_role() -> None:
    documents = _render({"config": {"fileserver": {"enabled": True, "namespace": "webdav"}}})
    assert _one(documents, "Namespace")["metadata"]["name"] == "webdav"
    assert _one(documents, "Role", "-fileservers")["metadata"]["namespace"] == "webdav"
    assert _one(documents, "RoleBinding", "-fileservers")["metadata"]["namespace"] == "webdav"
    assert _config(documents)["fileserver"]["namespace"] == "webdav"


def test_every_file_server_route_is_behind_the_ingress_with_its_scopes() -> None:
    documents = _render(ENABLED)
    for (_, path), scopes in ROUTE_SCOPES.items():
        matching = _ingress_for(documents, path)
        assert len(matching) == 1, (path, [d["metadata"]["name"] for d in matching])
        config = matching[0]["config"]
        assert config["scopes"] == scopes, path
        assert config["baseUrl"] == "https://data.example.org"
        assert "delegate" not in config, path
        # Only the page browsers open sends a visitor without a session to log in.
        assert config.get("loginRedirect", False) is (path == "/files"), path
    for path in SERVERS_PATHS:
        assert _ingress_for(documents, path) == [], path


def test_the_configured_scope_guards_the_users_routes() -> None:
    documents = _render({"config": {"fileserver": {"enabled": True, "scope": "write:webdav"}}})
    for (_, path), scopes in ROUTE_SCOPES.items():
        (ingress,) = _ingress_for(documents, path)
        expected = {
            rule: ["write:webdav" if s == "write:files" else s for s in needed]
            for rule, needed in scopes.items()
        }
        assert ingress["config"]["scopes"] == expected, path


def test_a_path_prefix_moves_the_file_server_routes() -> None:
    documents = _render({**ENABLED, "ingress": {"pathPrefix": "/nublado/"}})
    for _, path in ROUTE_SCOPES:
        assert len(_ingress_for(documents, f"/nublado{path}")) == 1, path
        assert _ingress_for(documents, path) == [], path

"""The Helm chart: rendered with Go's text/template and sprig (Helm's engine), every object valid
for the Kubernetes versions the chart supports, its values in step with the service's config,
its ingress routes with the scopes of MISSION.md's table."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from flask import Flask
from marshmallow import fields

from app.config.schema import ConfigSchema
from devstack.helm import HelmRenderError, render_chart
from devstack.stack import REPO_ROOT

CHART = REPO_ROOT / "chart"
NAMESPACE = "nublado"
KUBE_VERSIONS = ("1.28.0", "1.31.0", "1.34.0", "1.37.0")
"""The Kubernetes versions the chart supports (Chart.yaml's kubeVersion, to the newest known)."""
BASE_VALUES: dict[str, Any] = {"ingress": {"host": "data.example.org"}}

CHART_MANAGED = {
    "redis.url",
    "redis.sentinel",
    "redis.sentinel.addresses",
    "redis.sentinel.serviceName",
    "redis.sentinel.db",
    "redis.sentinel.username",
    "redis.sentinel.sentinelUsername",
    "kubernetes.mode",
    "kubernetes.host",
    "kubernetes.kubeconfig",
    "kubernetes.certificateAuthority",
    "kubernetes.serviceNamespace",
}
"""Config keys the chart sets itself instead of taking them from values."""


def _render(
    values: dict[str, Any] | None = None, kube_version: str = "1.30"
) -> list[dict[str, Any]]:
    merged = _merge(BASE_VALUES, values or {})
    return render_chart(CHART, namespace=NAMESPACE, values=merged, kube_version=kube_version)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _one(documents: list[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    (found,) = [
        d for d in documents if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)
    ]
    return found


# Rendering and schemas -------------------------------------------------------------------------


SENTINEL_VALUES: dict[str, Any] = {
    "redis": {
        "sentinel": {"enabled": True},
        "auth": {"existingSecret": "redis-auth", "sentinelPasswordKey": "sentinel-password"},
    }
}
"""The in-chart Redis with Sentinel, with passwords from an existing Secret."""
EXTERNAL_SENTINEL_VALUES: dict[str, Any] = {
    "redis": {
        "enabled": False,
        "external": {"sentinel": {"addresses": ["s-0.redis:26379", "s-1.redis:26379"]}},
        "auth": {"existingSecret": "redis-auth", "username": "spawner"},
    }
}


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_every_object_is_valid_for_each_supported_kubernetes(kube_version: str) -> None:
    for values in (
        {},
        {"redis": {"enabled": False, "external": {"secretName": "redis-url"}}},
        {"redis": {"persistence": {"enabled": False}}, "podDisruptionBudget": {"enabled": False}},
        SENTINEL_VALUES,
        {"redis": {**SENTINEL_VALUES["redis"], "persistence": {"enabled": False}}},
        EXTERNAL_SENTINEL_VALUES,
    ):
        documents = _render(values, kube_version=kube_version[:4])
        for doc in documents:
            if doc["kind"] == "GafaelfawrIngress":
                # A custom resource: its template must be a valid Ingress.
                ingress = {
                    "apiVersion": "networking.k8s.io/v1",
                    "kind": "Ingress",
                    "metadata": {**doc["template"]["metadata"], "namespace": NAMESPACE},
                    "spec": doc["template"]["spec"],
                }
                kubernetes_validate.validate(ingress, kube_version, strict=True)
                assert set(doc) == {"apiVersion", "kind", "metadata", "config", "template"}
                assert doc["apiVersion"] == "gafaelfawr.lsst.io/v1alpha1"
                continue
            kubernetes_validate.validate(doc, kube_version, strict=True)


def test_the_default_release() -> None:
    documents = _render()
    kinds = sorted(d["kind"] for d in documents)
    assert kinds == sorted(
        ["ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "ServiceAccount"]
        + ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
        + ["PersistentVolumeClaim", "Deployment", "Service"]  # the in-chart Redis
        + ["GafaelfawrIngress"] * 8
    )
    server = _one(documents, "Deployment", "lab-spawner")
    spec = server["spec"]["template"]["spec"]
    assert server["spec"]["replicas"] == 2
    # Two roles of one image in each pod: the web answers, the runner runs the operations.
    web, runner = spec["containers"]
    assert (web["name"], runner["name"]) == ("web", "runner")
    assert web["image"] == runner["image"]
    # The web's gunicorn; the runner one process with no gunicorn master over it.
    assert web["command"] == ["gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"]
    assert runner["command"] == ["python", "runner.py"]
    for container, port in ((web, "http"), (runner, "runner")):
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
        assert [p["name"] for p in container["ports"]] == [port]
        assert container["resources"]["limits"] and container["resources"]["requests"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        env = {e["name"]: e for e in container["env"]}
        assert env["SPAWNER_ROLE"]["value"] == container["name"]
        assert env["SPAWNER_CONFIG_PATH"]["value"] == "/etc/lab-spawner/config.yaml"
        assert "SPAWNER_REDIS_URL" not in env
    # Each container its own /tmp: the web's heartbeat files and metrics samples apart.
    mounts = [
        {m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/tmp"} for c in (web, runner)
    ]
    assert mounts == [{"tmp-web"}, {"tmp-runner"}]
    # The web workers follow the container's cores unless set; the runner has no workers.
    assert "SPAWNER_WORKERS" not in {e["name"] for e in web["env"]}
    assert "SPAWNER_WORKERS" not in {e["name"] for e in runner["env"]}
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["serviceAccountName"] == "lab-spawner"
    # The PDB and the Services select the server pods only, not Redis's.
    pdb = _one(documents, "PodDisruptionBudget")
    labels = server["spec"]["template"]["metadata"]["labels"]
    redis = _one(documents, "Deployment", "-redis")
    redis_labels = redis["spec"]["template"]["metadata"]["labels"]
    for selector in (
        pdb["spec"]["selector"]["matchLabels"],
        server["spec"]["selector"]["matchLabels"],
    ):
        assert selector.items() <= labels.items()
        assert not selector.items() <= redis_labels.items()
    assert _one(documents, "Service", "lab-spawner")["spec"]["selector"].items() <= labels.items()

    config = yaml.safe_load(_one(documents, "ConfigMap")["data"]["config.yaml"])
    assert config["redis"]["url"] == "redis://lab-spawner-redis:6379/0"
    assert config["kubernetes"]["mode"] == "in-cluster"
    assert config["kubernetes"]["serviceNamespace"] == NAMESPACE


def test_replicas_workers_and_an_external_redis() -> None:
    documents = _render(
        {
            "replicaCount": 3,
            "workers": 4,
            "redis": {"enabled": False, "external": {"secretName": "redis", "secretKey": "url"}},
        }
    )
    assert not [d for d in documents if d["metadata"]["name"].endswith("-redis")]
    server = _one(documents, "Deployment")
    assert server["spec"]["replicas"] == 3
    for container in server["spec"]["template"]["spec"]["containers"]:
        env = {e["name"]: e for e in container["env"]}
        if container["name"] == "web":
            assert env["SPAWNER_WORKERS"]["value"] == "4"
        else:
            assert "SPAWNER_WORKERS" not in env
        # The URL (and its password) comes from the Secret, never through the ConfigMap.
        secret = env["SPAWNER_REDIS_URL"]["valueFrom"]["secretKeyRef"]
        assert secret == {"name": "redis", "key": "url"}
    config = yaml.safe_load(_one(documents, "ConfigMap")["data"]["config.yaml"])
    assert "url" not in config["redis"]


def test_empty_workers_leave_the_count_to_the_server() -> None:
    """No ``SPAWNER_WORKERS`` then, and the server starts one worker per whole core of the
    container's CPU limit (``app.runtime.defaults``)."""
    env = _server_env(_render({"workers": None}))
    assert "SPAWNER_WORKERS" not in env
    assert env["SPAWNER_BIND"]["value"] == "0.0.0.0:8080"


def _server_env(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """The web container's environment, after checking the runner's holds the same but for
    its role, port and worker count."""
    server = _one(documents, "Deployment", "lab-spawner")
    web, runner = (
        {e["name"]: e for e in c["env"]} for c in server["spec"]["template"]["spec"]["containers"]
    )
    own = {"SPAWNER_ROLE", "SPAWNER_BIND", "SPAWNER_WORKERS"}
    assert {k: v for k, v in web.items() if k not in own} == {
        k: v for k, v in runner.items() if k not in own
    }
    return web


def test_the_in_chart_redis_with_sentinel() -> None:
    documents = _render(SENTINEL_VALUES)
    assert not [
        d for d in documents if d["kind"] == "Deployment" and "-redis" in d["metadata"]["name"]
    ]
    redis = _one(documents, "StatefulSet", "-redis")
    headless = _one(documents, "Service", "-redis-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert redis["spec"]["serviceName"] == headless["metadata"]["name"]
    assert redis["spec"]["replicas"] == 3
    pod = redis["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["redis", "sentinel"]
    for container in pod["containers"]:
        env = {e["name"]: e for e in container["env"]}
        assert env["QUORUM"]["value"] == "2"
        # Passwords come from the Secret, never inline.
        assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
            "name": "redis-auth",
            "key": "redis-password",
        }
        assert env["SENTINEL_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == "sentinel-password"
    assert redis["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"

    config = yaml.safe_load(_one(documents, "ConfigMap", "lab-spawner")["data"]["config.yaml"])
    assert "url" not in config["redis"]
    assert config["redis"]["sentinel"] == {
        "addresses": [f"lab-spawner-redis-{i}.lab-spawner-redis-headless:26379" for i in range(3)],
        "serviceName": "spawner",
    }
    env = _server_env(documents)
    assert "SPAWNER_REDIS_URL" not in env
    assert env["SPAWNER_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "redis-auth",
        "key": "redis-password",
    }
    assert env["SPAWNER_REDIS_SENTINEL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "redis-auth",
        "key": "sentinel-password",
    }


def test_an_external_redis_sentinel() -> None:
    documents = _render(EXTERNAL_SENTINEL_VALUES)
    assert not [d for d in documents if "-redis" in d["metadata"]["name"]]
    config = yaml.safe_load(_one(documents, "ConfigMap")["data"]["config.yaml"])
    assert config["redis"]["sentinel"] == {
        "addresses": ["s-0.redis:26379", "s-1.redis:26379"],
        "serviceName": "mymaster",
        "db": 0,
        "username": "spawner",
    }
    env = _server_env(documents)
    assert "SPAWNER_REDIS_URL" not in env
    assert "SPAWNER_REDIS_SENTINEL_PASSWORD" not in env
    assert env["SPAWNER_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "redis-auth"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"redis": {"enabled": False}}, "redis.external.secretName must name a Secret"),
        (
            {"redis": {"sentinel": {"enabled": True, "replicas": 2}}},
            "redis.sentinel.replicas must be at least 3",
        ),
        ({"ingress": {"host": ""}}, "ingress.host must be set"),
    ],
)
def test_missing_required_values_fail_with_a_message(values: dict[str, Any], message: str) -> None:
    with pytest.raises(HelmRenderError, match=re.escape(message)):
        _render(values)


def test_a_config_change_rolls_the_pods() -> None:
    def checksum(values: dict[str, Any]) -> str:
        server = _one(_render(values), "Deployment", "lab-spawner")
        return str(server["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum({}) == checksum({})
    assert checksum({}) != checksum({"config": {"logLevel": "DEBUG"}})


# Values and the service's configuration ------------------------------------------------------


def _schema_paths(schema: Any, prefix: str = "") -> set[str]:
    paths = set()
    for name, field in schema.fields.items():
        path = f"{prefix}{field.data_key or name}"
        paths.add(path)
        inner = None
        if isinstance(field, fields.Nested):
            inner = field.schema
        elif isinstance(field, fields.List) and isinstance(field.inner, fields.Nested):
            inner = field.inner.schema
        if inner is not None:
            paths |= _schema_paths(inner, f"{path}.")
    return paths


def _value_paths(value: Any, prefix: str = "") -> set[str]:
    paths: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}{key}"
            paths.add(path)
            if key in ("env", "nodeSelector", "annotations", "podTemplate"):
                continue  # free-form maps: their keys are data (or a pod spec's fields)
            paths |= _value_paths(item, f"{path}.")
    elif isinstance(value, list):
        for item in value:
            paths |= _value_paths(item, prefix)
    return paths


def _documented_examples(text: str) -> set[str]:
    """Paths of the keys shown in ``# Example:`` blocks, placed under the key they annotate.

    An example block is the run of commented lines after ``# Example:``; uncommented, it is
    YAML at the indentation of the real keys around it.
    """
    paths: set[str] = set()
    stack: list[tuple[int, str]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        real = re.match(r"^(\s*)([A-Za-z][\w-]*):", line)
        if real:
            indent = len(real.group(1))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, real.group(2)))
        example = re.match(r"^(\s*)# Example:\s*$", line)
        if example:
            indent = len(example.group(1))
            block = []
            index += 1
            while index < len(lines) and lines[index].startswith(f"{' ' * indent}# "):
                block.append(lines[index][indent + 2 :])
                index += 1
            parents = [key for level, key in stack if level < indent]
            prefix = "".join(f"{key}." for key in parents)
            paths |= _value_paths(yaml.safe_load("\n".join(block)), prefix)
            continue
        index += 1
    return paths


def test_values_document_exactly_the_config_keys_the_service_accepts() -> None:
    text = (CHART / "values.yaml").read_text()
    values = yaml.safe_load(text)
    schema = {f"config.{p}" for p in _schema_paths(ConfigSchema())}
    in_values = {p for p in _value_paths(values) if p.startswith("config.")}
    examples = {p for p in _documented_examples(text) if p.startswith("config.")}
    managed = {f"config.{p}" for p in CHART_MANAGED}
    # Nothing the service would refuse...
    assert in_values - schema == set()
    assert examples - schema == set()
    # ...and nothing it accepts left undocumented.
    assert schema - in_values - examples - managed == set()
    assert managed <= schema
    # Every key in values.yaml that holds a value carries a description (a comment above it).
    undocumented = [key for key, documented in _described_keys(text) if not documented]
    assert undocumented == []


FREE_FORM = {
    "resources",
    "env",
    "nodeSelector",
    "annotations",
    "podAnnotations",
    "affinity",
    "podTemplate",
}
"""Maps whose keys are data (Kubernetes fields, variable names), described with their parent."""


def _described_keys(text: str) -> list[tuple[str, bool]]:
    """Each key that holds a value (not a section), outside list items and free-form maps,
    and whether a comment line sits directly above it."""
    found = []
    lines = text.splitlines()
    ancestors: list[tuple[int, str]] = []
    for number, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        while ancestors and ancestors[-1][0] >= indent:
            ancestors.pop()
        if line.lstrip().startswith("- "):
            ancestors.append((indent, "-"))  # a list item: example data, described with its list
            continue
        key = re.match(r"^\s*([A-Za-z][\w-]*):(.*)$", line)
        if key is None:
            continue
        ancestors.append((indent, key.group(1)))
        inside = {name for _, name in ancestors[:-1]}
        if inside & (FREE_FORM | {"-"}):
            continue
        if key.group(2).strip() == "":
            following = next((n for n in lines[number + 1 :] if n.strip()), "")
            if not following.lstrip().startswith("- "):
                continue  # a section: its keys are described one by one
        found.append((key.group(1), lines[number - 1].lstrip().startswith("#")))
    return found


def test_the_rendered_configuration_is_accepted_by_the_service(tmp_path: Path) -> None:
    for values in (
        {},
        {"redis": {"enabled": False, "external": {"secretName": "r"}}},
        SENTINEL_VALUES,
        EXTERNAL_SENTINEL_VALUES,
    ):
        rendered = _one(_render(values), "ConfigMap", "lab-spawner")["data"]["config.yaml"]
        raw = yaml.safe_load(rendered)
        config = ConfigSchema().load(raw)  # raises on any unknown or invalid key
        assert config.kubernetes.service_namespace == NAMESPACE
        assert config.lab.sizes[0].name == "small"


# Ingress routes and scopes -------------------------------------------------------------------

EXPECTED_SCOPES = {
    ("GET", "/spawner/v1/labs"): {"all": ["admin:notebook"]},
    ("GET", "/spawner/v1/labs/rachel"): {"all": ["admin:notebook"]},
    ("DELETE", "/spawner/v1/labs/rachel"): {"all": ["admin:notebook"]},
    ("POST", "/spawner/v1/labs/rachel/spawn"): {"all": ["exec:notebook"]},
    ("POST", "/spawner/v1/labs/rachel/create"): {"all": ["exec:notebook"]},
    ("GET", "/spawner/v1/labs/rachel/events"): {"any": ["exec:notebook", "admin:notebook"]},
    ("GET", "/spawner/v1/labs/rachel/clusters/rachel/events"): {
        "any": ["exec:notebook", "admin:notebook"]
    },
    ("GET", "/spawner/v1/labs/rachel/kernels/rachel/events"): {
        "any": ["exec:notebook", "admin:notebook"]
    },
    ("GET", "/spawner/v1/apps/rachel/events"): {"any": ["exec:notebook", "admin:notebook"]},
    ("GET", "/spawner/v1/labs/rachel/clusters"): {"any": ["exec:notebook", "admin:notebook"]},
    ("GET", "/spawner/v1/labs/rachel/clusters/rachel"): {
        "any": ["exec:notebook", "admin:notebook"]
    },
    ("GET", "/spawner/v1/labs/rachel/kernels"): {"any": ["exec:notebook", "admin:notebook"]},
    ("GET", "/spawner/v1/labs/rachel/kernels/rachel"): {"any": ["exec:notebook", "admin:notebook"]},
    ("GET", "/spawner/v1/app-templates"): {"any": ["exec:notebook", "admin:notebook"]},
    ("GET", "/spawner/v1/apps"): {"any": ["exec:notebook", "admin:notebook"]},
    ("GET", "/spawner/v1/apps/rachel"): {"any": ["exec:notebook", "admin:notebook"]},
    ("POST", "/spawner/v1/apps/rachel/stop"): {"any": ["exec:notebook", "admin:notebook"]},
    ("POST", "/spawner/v1/apps/rachel/start"): {"any": ["exec:notebook", "admin:notebook"]},
    ("GET", "/spawner/v1/apps/rachel/logs"): {"any": ["exec:notebook", "admin:notebook"]},
    ("GET", "/ddl_cluster_scaler/list/rachel"): {"any": ["exec:notebook", "admin:notebook"]},
    ("GET", "/ddl_cluster_scaler/cluster/rachel/rachel"): {
        "any": ["exec:notebook", "admin:notebook"]
    },
    ("PATCH", "/ddl_cluster_scaler/scale/rachel/rachel"): {
        "any": ["exec:notebook", "admin:notebook"]
    },
    ("PATCH", "/ddl_cluster_scaler/head-hw-tier/rachel/rachel"): {
        "any": ["exec:notebook", "admin:notebook"]
    },
    ("PATCH", "/ddl_cluster_scaler/restart_head/rachel/rachel"): {
        "any": ["exec:notebook", "admin:notebook"]
    },
    ("GET", "/ddl_cluster_scaler/restart_head_status/rachel/rachel"): {
        "any": ["exec:notebook", "admin:notebook"]
    },
    ("GET", "/spawner/v1/user-status"): {"all": ["exec:notebook"]},
    ("GET", "/spawner/v1/spawn-form/rachel"): {"all": ["exec:notebook"]},
    ("GET", "/spawner/v1/lab-form/rachel"): {"all": ["exec:notebook"]},
    ("GET", "/spawner/v1/images"): {"all": ["admin:notebook"]},
    ("GET", "/spawner/v1/images/records"): {"all": ["admin:notebook"]},
    ("GET", "/spawner/v1/images/records/rachel"): {"all": ["admin:notebook"]},
    ("POST", "/spawner/v1/images/records/rachel/revalidate"): {"all": ["admin:notebook"]},
    ("POST", "/spawner/v1/images/records/rachel/approve"): {"all": ["admin:notebook"]},
    ("POST", "/spawner/v1/images/records/rachel/reject"): {"all": ["admin:notebook"]},
    ("GET", "/spawner/v1/prepulls"): {"all": ["admin:notebook"]},
    ("GET", "/spawner/v1/operations"): {"all": ["admin:notebook"]},
    ("GET", "/spawner/v1/leaders"): {"all": ["admin:notebook"]},
    ("GET", "/spawner/v1/admin/stream"): {"all": ["admin:notebook"]},
    ("PUT", "/spawner/v1/admin/maintenance"): {"all": ["admin:notebook"]},
    ("POST", "/spawner/v1/admin/reconcile"): {"all": ["admin:notebook"]},
    ("GET", "/spawner/v1/admin/audit"): {"all": ["admin:notebook"]},
    ("GET", "/spawner/v1/admin/failed-labs"): {"all": ["admin:notebook"]},
    ("DELETE", "/spawner/v1/admin/labs/rachel/provisioned"): {"all": ["admin:notebook"]},
    ("POST", "/spawner/v1/admin/labs/rachel/force-delete"): {"all": ["admin:notebook"]},
    ("POST", "/spawner/v1/admin/pod"): {"all": ["admin:lab-pods"]},
    ("GET", "/spawner/v1/admin/pod"): {"all": ["admin:lab-pods"]},
    ("DELETE", "/spawner/v1/admin/pod"): {"all": ["admin:lab-pods"]},
    ("GET", "/spawner/v1/openapi.json"): {"anonymous": True},
    ("GET", "/spawner/v1/docs"): {"anonymous": True},
}
NOT_ROUTED = {"/healthz", "/readyz", "/metrics"}


def _matches(path_rule: dict[str, Any], path: str) -> bool:
    kind, pattern = path_rule["pathType"], path_rule["path"]
    if kind == "Exact":
        return path == pattern
    if kind == "Prefix":
        return path == pattern or path.startswith(pattern.rstrip("/") + "/")
    return re.match(pattern, path) is not None  # nginx regex paths match from the start


def _ingress_for(documents: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    return [
        doc
        for doc in documents
        if doc["kind"] == "GafaelfawrIngress"
        and any(
            _matches(p, path)
            for rule in doc["template"]["spec"]["rules"]
            for p in rule["http"]["paths"]
        )
    ]


FILESERVER_ROUTE_SCOPES = {
    ("GET", "/files"): {"all": ["write:files"]},
    ("GET", "/fileserver/v1/user-status"): {"all": ["write:files"]},
    ("GET", "/fileserver/v1/users"): {"all": ["admin:notebook"]},
    ("GET", "/fileserver/v1/users/rachel"): {"all": ["admin:notebook"]},
    ("DELETE", "/fileserver/v1/users/rachel"): {"all": ["admin:notebook"]},
    ("GET", "/spawner/v1/fileservers/rachel"): {"any": ["write:files", "admin:notebook"]},
    ("DELETE", "/spawner/v1/fileservers/rachel"): {"any": ["write:files", "admin:notebook"]},
    ("GET", "/spawner/v1/fileservers/rachel/events"): {"any": ["write:files", "admin:notebook"]},
}
"""Each file-server route and the scopes its ingress requires (ingress rules match paths, so
a GET and a DELETE of one path share theirs)."""


def test_every_route_is_behind_the_ingress_with_its_scopes(app: Flask) -> None:
    documents = _render()
    rules = {
        re.sub(r"<[^>]+>", "rachel", rule.rule)
        for rule in app.url_map.iter_rules()
        if rule.endpoint != "static"
    }
    # File servers' routes are routed only when they are enabled (test_fileserver_chart).
    fileserver_paths = {path for _, path in FILESERVER_ROUTE_SCOPES}
    assert rules == {path for _, path in EXPECTED_SCOPES} | NOT_ROUTED | fileserver_paths
    for path in fileserver_paths:
        assert _ingress_for(documents, path) == [], path
    for (_, path), scopes in EXPECTED_SCOPES.items():
        matching = _ingress_for(documents, path)
        assert len(matching) == 1, (path, [d["metadata"]["name"] for d in matching])
        assert matching[0]["config"]["scopes"] == scopes, path
        assert matching[0]["config"]["baseUrl"] == "https://data.example.org"
        delegated = matching[0]["config"].get("delegate")
        spawns = path.endswith(("/spawn", "/create"))
        assert (delegated == {"notebook": {}}) == spawns, path
    for path in NOT_ROUTED:
        assert _ingress_for(documents, path) == []


def test_the_maintenance_pods_route_requires_the_configured_scope() -> None:
    path = "/spawner/v1/admin/pod"
    documents = _render({"config": {"admin": {"pod": {"scope": "admin:notebook"}}}})
    (ingress,) = _ingress_for(documents, path)
    assert ingress["config"]["scopes"] == {"all": ["admin:notebook"]}
    assert ingress["metadata"]["name"].endswith("-admin-pod")
    # Nothing else that route's prefix starts is sent through it.
    assert _ingress_for(documents, path + "/extra") == []


def test_a_path_prefix_moves_every_route() -> None:
    documents = _render({"ingress": {"pathPrefix": "/nublado/"}})
    assert _ingress_for(documents, "/nublado/spawner/v1/labs/rachel/spawn")
    assert not _ingress_for(documents, "/spawner/v1/labs/rachel/spawn")

"""A group's app as Kubernetes objects: the template's pod with the preset variables first,
the size's resources, the group's storage, the Service, the NetworkPolicy, and the
GafaelfawrIngress whose rules follow the app's scope; the phases read from a Deployment; and
the ``apps`` configuration's checks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.builders import names
from app.config import Config, parse_config
from app.config.loader import ConfigError
from app.models.sizes import PodSize
from app.workloads.app.builders import (
    build_deployment,
    build_group_namespace,
    build_group_quota,
    build_ingress,
    build_network_policy,
    build_service,
    missing_variables,
)
from app.workloads.app.models import AppPhase, AppRecord, AppScope
from app.workloads.app.phases import app_state
from app.workloads.sizes import pod_size
from tests.builders.conftest import IMAGES, Validator

TEMPLATE: dict[str, Any] = {
    "name": "mlflow",
    "version": "2.1.1",
    "description": "Tracks machine-learning experiments.",
    "docLink": "https://mlflow.org/docs/latest/index.html",
    "podTemplate": {
        "containers": [
            {
                "name": "mlflow",
                "image": "registry.test/mlflow/mlflow:2.1.1",
                "args": ["mlflow", "server", "--static-prefix", "$(APP_BASE_URL)"],
                "env": [{"name": "FROM_TEMPLATE", "value": "yes"}],
                "ports": [{"name": "http", "containerPort": 5000}],
            },
            {"name": "sidecar", "image": "registry.test/not/kept:1"},
        ]
    },
    "servicePorts": [{"name": "http", "port": 5000, "targetPort": "http"}],
    "httpPort": 5000,
    "defaultEnvs": [
        {"name": "BACKEND_STORE_URI", "defaultValue": "sqlite:///$(APP_ROOT)/mlflow.db"},
        {"name": "ARTIFACT_BUCKET", "description": "Where artifacts go", "optional": False},
        {"name": "THEME", "optional": True},
    ],
}


GPU_TIER = {
    "name": "gpu",
    "cores": 4,
    "memory": "32Gi",
    "gpus": 1,
    "nodePool": "gpu",
}


def apps_config(**apps: Any) -> Config:
    prepull = {
        "name": "test",
        "type": "simple",
        "images": [{"url": i.reference, "name": i.name} for i in IMAGES],
    }
    return parse_config(
        {
            "gafaelfawr": {"url": "http://gafaelfawr.test"},
            "prepull": [prepull],
            "lab": {"sizes": [{"name": "small", "cpu": 1, "memory": "4Gi"}]},
            "clusters": {"tiers": [{"name": "tiny", "cores": 0.5, "memory": "1Gi"}, GPU_TIER]},
            "apps": {"templates": [TEMPLATE], "baseUrl": "https://data.test", **apps},
        }
    )


def small(config: Config) -> PodSize:
    size = pod_size(config, "small")
    assert size is not None
    return size


def record(**fields: Any) -> AppRecord:
    values: dict[str, Any] = {
        "id": "mlflow-x7k2p",
        "group": "g-science",
        "template": "mlflow",
        "template_version": "2.1.1",
        "name": "Our experiments",
        "scope": AppScope.GROUP,
        "size": "small",
        "env": {"ARTIFACT_BUCKET": "s3://science", "EXTRA": "1"},
        "stopped": False,
        "created": "2026-11-27T10:00:00Z",
        "creator": "rachel",
    }
    values.update(fields)
    return AppRecord(**values)


NAMESPACE = "nublado-apps-g-science"


def test_the_deployment_keeps_the_first_container_with_the_presets_first(
    validate_object: Validator,
) -> None:
    config = apps_config()
    template = config.apps.templates[0]
    deployment = build_deployment(config, template, record(), small(config), NAMESPACE)
    validate_object(deployment)
    assert deployment["metadata"]["name"] == "app-mlflow-x7k2p"
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["selector"] == {"matchLabels": {names.APP_LABEL: "mlflow-x7k2p"}}
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    pod = spec["template"]["spec"]
    assert spec["template"]["metadata"]["labels"][names.GROUP_LABEL] == "g-science"
    (container,) = pod["containers"]
    assert container["name"] == "mlflow"
    env = [(e["name"], e["value"]) for e in container["env"]]
    assert env == [
        ("APP_ID", "mlflow-x7k2p"),
        ("APP_ROOT", "/app-data/mlflow-x7k2p"),
        ("APP_BASE_URL", "/apps/mlflow-x7k2p/"),
        ("PLATFORM_URL", "https://data.test"),
        ("GROUP", "g-science"),
        ("FROM_TEMPLATE", "yes"),
        ("BACKEND_STORE_URI", "sqlite:///$(APP_ROOT)/mlflow.db"),
        ("ARTIFACT_BUCKET", "s3://science"),
        ("EXTRA", "1"),
    ]
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "4Gi"}
    # Without a group volume the app's data lives in an emptyDir at APP_ROOT.
    assert pod["volumes"] == [{"name": "app-root", "emptyDir": {}}]
    assert container["volumeMounts"] == [
        {"name": "app-root", "mountPath": "/app-data/mlflow-x7k2p"}
    ]
    assert "initContainers" not in pod
    assert pod["automountServiceAccountToken"] is False
    # The template itself is left as it was.
    assert len(config.apps.templates[0].pod_spec["containers"]) == 2
    stopped = build_deployment(config, template, record(stopped=True), small(config), NAMESPACE)
    assert stopped["spec"]["replicas"] == 0


def test_a_group_volume_is_mounted_and_the_apps_directory_made_in_it(
    validate_object: Validator,
) -> None:
    config = apps_config(
        groupVolume={"type": "nfs", "server": "nfs.test", "path": "/groups/{group}"}
    )
    template = config.apps.templates[0]
    deployment = build_deployment(config, template, record(), small(config), NAMESPACE)
    validate_object(deployment)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "group", "nfs": {"server": "nfs.test", "path": "/groups/g-science"}}
    ]
    (init,) = pod["initContainers"]
    assert init["securityContext"]["runAsUser"] == 0
    assert init["env"] == [{"name": "APP_ROOT", "value": "/group/apps/mlflow-x7k2p"}]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["APP_ROOT"] == "/group/apps/mlflow-x7k2p"


def test_a_hardware_tier_gives_its_gpus_and_node_pool(validate_object: Validator) -> None:
    config = apps_config(quotas={"default": {"cpu": 8, "memory": "64Gi", "gpus": 1}})
    template = config.apps.templates[0]
    gpu = pod_size(config, "gpu")
    assert gpu is not None
    deployment = build_deployment(config, template, record(size="gpu"), gpu, NAMESPACE)
    validate_object(deployment)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"lab-spawner.jupyter.org/node-pool": "gpu"}
    resources = pod["containers"][0]["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == "1"
    quota = build_group_quota("g-science", NAMESPACE, config.apps.default_quota, gpu)
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "2"


def test_service_and_network_policy(validate_object: Validator) -> None:
    config = apps_config(ingressNamespaces=["ingress-nginx", "gafaelfawr"])
    template = config.apps.templates[0]
    service = build_service(template, record(), NAMESPACE)
    validate_object(service)
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 5000, "targetPort": "http", "protocol": "TCP"}
    ]
    policy = build_network_policy(config.apps, record(), NAMESPACE)
    validate_object(policy)
    peers = policy["spec"]["ingress"][0]["from"]
    assert peers[0] == {"podSelector": {}}
    assert [p["namespaceSelector"]["matchLabels"] for p in peers[1:]] == [
        {"kubernetes.io/metadata.name": "ingress-nginx"},
        {"kubernetes.io/metadata.name": "gafaelfawr"},
    ]


@pytest.mark.parametrize(
    ("scope", "scopes", "login"),
    [
        (AppScope.PUBLIC, {"anonymous": True}, None),
        (AppScope.PLATFORM, {"any": ["exec:notebook", "read:image"]}, True),
        (AppScope.GROUP, {"all": ["app:g-science"]}, True),
    ],
)
def test_the_ingress_follows_the_scope(
    scope: AppScope, scopes: dict[str, Any], login: bool | None
) -> None:
    config = apps_config(platformScopes=["exec:notebook", "read:image"])
    template = config.apps.templates[0]
    ingress = build_ingress(config.apps, template, record(scope=scope), NAMESPACE)
    assert ingress["config"]["scopes"] == scopes
    assert ingress["config"].get("loginRedirect") is login
    (rule,) = ingress["template"]["spec"]["rules"]
    assert rule["host"] == "data.test"
    (path,) = rule["http"]["paths"]
    assert path["path"] == "/apps/mlflow-x7k2p/"
    assert path["backend"]["service"] == {"name": "app-mlflow-x7k2p", "port": {"number": 5000}}


def test_the_group_namespace_and_quota(validate_object: Validator) -> None:
    config = apps_config(quotas={"groups": [{"group": "g-science", "cpu": 2, "memory": "8Gi"}]})
    namespace = build_group_namespace("g-science", NAMESPACE)
    validate_object(namespace)
    quota = build_group_quota(
        "g-science", NAMESPACE, config.apps.quota_for("g-science"), small(config)
    )
    validate_object(quota)
    # The group's 2 cores and 8Gi, plus one small pod a rolling update runs beside the old.
    assert quota["spec"]["hard"] == {
        "limits.cpu": "3",
        "limits.memory": "12Gi",
        "requests.nvidia.com/gpu": "0",
    }
    assert config.apps.quota_for("g-other") == config.apps.default_quota


def test_required_variables_without_a_value() -> None:
    template = apps_config().apps.templates[0]
    assert missing_variables(template, {}) == ["ARTIFACT_BUCKET"]
    assert missing_variables(template, {"ARTIFACT_BUCKET": "s3://x"}) == []


@pytest.mark.parametrize(
    ("apps", "message"),
    [
        ({"templates": [{**TEMPLATE, "httpPort": 8080}]}, "must be one of the service ports"),
        (
            {"templates": [{**TEMPLATE, "defaultEnvs": [{"name": "APP_ROOT"}]}]},
            "set by the service",
        ),
        ({"templates": [{**TEMPLATE, "podTemplate": {"containers": []}}]}, "must have containers"),
        ({"templates": [TEMPLATE, TEMPLATE]}, "duplicate names: mlflow"),
        ({"groupScope": "app:group"}, "must contain {group}"),
        ({"templates": [{**TEMPLATE, "name": "m" * 41}]}, "Longer than maximum length 40"),
        ({"templates": [{**TEMPLATE, "name": "2fa"}]}, "must start with a letter"),
        ({"groupVolume": {"type": "nfs", "path": "/g/{group}"}}, "required for type nfs"),
    ],
)
def test_bad_apps_configuration_is_refused(apps: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apps_config(**apps)


def deployment_with(
    replicas: int, status: dict[str, Any], conditions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "spec": {"replicas": replicas},
        "status": {**status, "conditions": conditions or []},
    }


RUNNING_POD = {
    "metadata": {"name": "app-1"},
    "status": {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "app", "ready": True, "state": {"running": {}}}],
    },
}


def pod_waiting(reason: str) -> dict[str, Any]:
    pod = copy.deepcopy(RUNNING_POD)
    pod["status"] = {
        "phase": "Pending",
        "containerStatuses": [
            {"name": "app", "image": "x:1", "state": {"waiting": {"reason": reason}}}
        ],
    }
    return pod


@pytest.mark.parametrize(
    ("deployment", "pods", "phase"),
    [
        (deployment_with(1, {"replicas": 1}), [], AppPhase.STARTING),
        (
            deployment_with(1, {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1}),
            [RUNNING_POD],
            AppPhase.READY,
        ),
        # Right after a change: the old pod serves, the new ReplicaSet has no pod yet.
        (deployment_with(1, {"replicas": 1, "readyReplicas": 1}), [RUNNING_POD], AppPhase.UPDATING),
        (
            deployment_with(1, {"replicas": 2, "readyReplicas": 1}),
            [RUNNING_POD, pod_waiting("ContainerCreating")],
            AppPhase.UPDATING,
        ),
        (deployment_with(0, {"replicas": 0, "terminatingReplicas": 1}), [], AppPhase.STOPPING),
        (deployment_with(0, {"replicas": 0}), [RUNNING_POD], AppPhase.STOPPING),
        (deployment_with(0, {}), [], AppPhase.STOPPED),
        (deployment_with(1, {"replicas": 1}), [pod_waiting("ImagePullBackOff")], AppPhase.ERROR),
        (
            deployment_with(
                1,
                {"replicas": 0},
                [{"type": "ReplicaFailure", "status": "True", "message": "exceeded quota"}],
            ),
            [],
            AppPhase.ERROR,
        ),
        (
            deployment_with(
                1,
                {"replicas": 1},
                [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}],
            ),
            [],
            AppPhase.ERROR,
        ),
    ],
)
def test_phases_are_read_from_the_deployment(
    deployment: dict[str, Any], pods: list[dict[str, Any]], phase: AppPhase
) -> None:
    assert app_state(deployment, pods).phase == phase


def test_an_errors_message_says_why() -> None:
    quota = deployment_with(
        1,
        {"replicas": 0},
        [{"type": "ReplicaFailure", "status": "True", "message": "exceeded quota: apps-quota"}],
    )
    assert "exceeded quota: apps-quota" in app_state(quota, []).message
    assert (
        "cannot pull image x:1"
        in app_state(deployment_with(1, {}), [pod_waiting("ErrImagePull")]).message
    )

"""Configurations, users and a schema validator for the builder tests (no services needed)."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

import jsonschema
import pytest
import referencing

from app.config import Config, parse_config
from app.models.identity import Group, UserInfo
from app.models.images import LabImage
from app.models.lab import LabOptions, LabSpec

DIGEST = "sha256:" + "ab" * 32
KUBERNETES_VERSION = "1.33.0"

Validator = Callable[[dict[str, Any]], None]

IMAGES = (
    LabImage("registry.test/lsstsqre/sciplat-lab:w_2024_42", "Weekly 2024_42", DIGEST),
    LabImage("registry.test/lsstsqre/sciplat-lab:r26_0_0", "Release 26.0.0", None),
)
"""Images a spec may run: one pinned to a digest, one whose digest is unknown."""


def make_config(**lab: Any) -> Config:
    """A Config from the required keys plus ``lab`` overrides (camelCase, as in the YAML)."""
    raw_lab: dict[str, Any] = {
        "sizes": [
            {"name": "small", "cpu": 1, "memory": "4Gi"},
            {
                "name": "medium",
                "cpu": 2,
                "memory": "8Gi",
                "requests": {"cpu": 0.5, "memory": "2Gi"},
            },
        ],
        **lab,
    }
    prepull = {
        "name": "test",
        "type": "simple",
        "images": [{"url": i.reference, "name": i.name} for i in IMAGES],
    }
    return parse_config(
        {"gafaelfawr": {"url": "http://gafaelfawr.test"}, "prepull": [prepull], "lab": raw_lab}
    )


FULL_LAB: dict[str, Any] = {
    "env": {"EXTERNAL_INSTANCE_URL": "https://rsp.test", "MEM_LIMIT": "configured"},
    "secrets": [
        {"secretName": "butler", "secretKey": "butler-credentials"},
        {"secretName": "butler", "secretKey": "postgres-password", "env": "PGPASSWORD"},
    ],
    "pullSecret": "pull-secret",
    "secretsPath": "/opt/lsst/software/jupyterlab/secrets",
    "volumes": [
        {"name": "home", "type": "nfs", "server": "nfs.test", "path": "/share/home"},
        {
            "name": "datasets",
            "type": "persistentVolumeClaim",
            "claimName": "data",
            "readOnly": True,
        },
        {"name": "software", "type": "hostPath", "path": "/cvmfs", "readOnly": True},
        {"name": "scratch", "type": "emptyDir"},
    ],
    "volumeMounts": [
        {"volumeName": "home", "mountPath": "/home"},
        {"volumeName": "datasets", "mountPath": "/datasets"},
        {"volumeName": "software", "mountPath": "/cvmfs", "subPath": "sw"},
        {"volumeName": "scratch", "mountPath": "/scratch"},
    ],
    "initContainers": [
        {
            "name": "provision-home",
            "image": "registry.test/provisioner:1.0",
            "privileged": True,
            "command": ["/provision"],
            "args": ["--home"],
            "volumeMounts": [{"volumeName": "home", "mountPath": "/home"}],
            "env": {"PROVISION_MODE": "create", "USER": "overridden"},
        },
        {"name": "welcome", "image": "registry.test/welcome:1.0"},
    ],
    "nodeSelector": {"nublado.test/lab": "true"},
    "tolerations": [
        {"key": "nublado.test/lab", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "spot", "value": "yes", "effect": "NoExecute", "tolerationSeconds": 30},
    ],
    "command": ["/opt/lsst/software/jupyterlab/runlab.sh"],
    "args": ["--debug-startup"],
    "port": 8899,
    "networkPolicy": {"ingressNamespaces": ["nublado", "jupyterhub"]},
}

TOKEN = "gt-delegated-notebook.token-secret-value"
HUB_TOKEN = "hub-api-token-secret-value"
COPIED = {"butler-credentials": "YnV0bGVy", "postgres-password": "cGdwYXNz"}
PULL_DATA = {".dockerconfigjson": "eyJhdXRocyI6IHt9fQ=="}


@pytest.fixture
def full_config() -> Config:
    """A configuration using every feature the builders support."""
    return make_config(**FULL_LAB)


@pytest.fixture
def minimal_config() -> Config:
    """Only the required keys: no secrets, volumes, init containers or pull secret."""
    return make_config()


RACHEL = UserInfo(
    username="rachel",
    name="Rachel Lopez",
    email="rachel@example.com",
    uid=1101,
    gid=1101,
    groups=(Group("rachel", 1101), Group("lsst-data", 2001), Group("g-no-gid", None)),
    notebook_quota=None,
)
WILE = UserInfo(
    username="wile",
    name="Wile E. Coyote",
    email=None,
    uid=1102,
    gid=1500,
    groups=(Group("staff", 1500), Group("science", 2002), Group("cloud-users", None)),
    notebook_quota=None,
)
LONER = UserInfo(
    username="loner",
    name=None,
    email=None,
    uid=1103,
    gid=1103,
    groups=(),
    notebook_quota=None,
)
COMMA = UserInfo(
    username="roadrunner",
    name="Runner, Road  Beep:Beep",
    email=None,
    uid=1104,
    gid=1104,
    groups=(Group("road-runners", 3001),),
    notebook_quota=None,
)
USERS = (RACHEL, WILE, LONER, COMMA)


def make_spec(
    config: Config,
    user: UserInfo = RACHEL,
    *,
    image: int = 0,
    size: str = "medium",
    env: dict[str, str] | None = None,
    debug: bool = False,
    reset_user_env: bool = False,
) -> LabSpec:
    """A spec for ``user`` running ``IMAGES[image]`` at ``size``."""
    chosen = IMAGES[image]
    lab_size = config.lab.size(size)
    assert lab_size is not None
    return LabSpec(
        user=user,
        options=LabOptions(
            image=chosen.reference, size=size, debug=debug, reset_user_env=reset_user_env
        ),
        image=chosen,
        size=lab_size,
        env=env if env is not None else {"JUPYTERHUB_USER": user.username},
    )


def _schema_validators() -> dict[tuple[str, str], jsonschema.Validator]:
    """One strict validator per (apiVersion, kind), from kubernetes_validate's bundled schemas.

    kubernetes_validate.validate reads ``<kind>-<group>-<version>.json`` and ``_definitions.json``
    from ``kubernetes-json-schema/v<version>-local-strict`` on every call; loading them once keeps
    the test fast. Strict schemas reject unknown fields, catching misspelt keys.
    """
    base = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    folder = base / f"v{KUBERNETES_VERSION}-local-strict"
    definitions = json.loads((folder / "_definitions.json").read_text())
    registry: referencing.Registry[Any] = (
        referencing.Resource.from_contents(definitions) @ referencing.Registry()
    )
    validators = {}
    for api_version, kind, filename in (
        ("v1", "Namespace", "namespace-v1.json"),
        ("v1", "ConfigMap", "configmap-v1.json"),
        ("v1", "Secret", "secret-v1.json"),
        ("v1", "Service", "service-v1.json"),
        ("v1", "Pod", "pod-v1.json"),
        ("v1", "ResourceQuota", "resourcequota-v1.json"),
        ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicy-networking-v1.json"),
        ("apps/v1", "Deployment", "deployment-apps-v1.json"),
    ):
        schema = json.loads((folder / filename).read_text())
        validators[(api_version, kind)] = jsonschema.Draft202012Validator(schema, registry=registry)
    return validators


@pytest.fixture(scope="session")
def validate_object() -> Validator:
    """Raise ``jsonschema.ValidationError`` unless the object matches the official schema."""
    validators = _schema_validators()

    def validate(obj: dict[str, Any]) -> None:
        validator = validators[(obj["apiVersion"], obj["kind"])]
        error = jsonschema.exceptions.best_match(validator.iter_errors(obj))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']}: {where}: {error.message}")

    return validate

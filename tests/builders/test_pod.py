"""The lab Pod."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from app.builders.pod import image_reference
from app.config import Config
from app.models.identity import UserInfo
from app.models.images import LabImage
from app.models.lab import LabSpec
from app.workloads.lab.builders import LabObjects, build_lab
from tests.builders.conftest import (
    COMMA,
    COPIED,
    DIGEST,
    LONER,
    PULL_DATA,
    RACHEL,
    TOKEN,
    WILE,
    make_config,
    make_spec,
)


def _build(config: Config, spec: LabSpec, *, provision: bool = False) -> LabObjects:
    copied = {s.secret_key: COPIED[s.secret_key] for s in config.lab.secrets}
    pull = PULL_DATA if config.lab.pull_secret else None
    return build_lab(
        spec, config, token=TOKEN, copied_secrets=copied, pull_secret_data=pull, provision=provision
    )


def _pod(config: Config, user: UserInfo = RACHEL, **kwargs: Any) -> dict[str, Any]:
    provision = kwargs.pop("provision", False)
    return _build(config, make_spec(config, user, **kwargs), provision=provision).pod


@pytest.mark.parametrize(
    ("user", "groups"),
    [(RACHEL, [2001]), (WILE, [2002]), (LONER, []), (COMMA, [3001])],
    ids=lambda v: v.username if isinstance(v, UserInfo) else "",
)
def test_runs_as_user_with_supplemental_groups(
    full_config: Config, user: UserInfo, groups: list[int]
) -> None:
    pod = _pod(full_config, user)
    assert pod["spec"]["securityContext"] == {
        "runAsUser": user.uid,
        "runAsGroup": user.gid,
        "runAsNonRoot": True,
        "supplementalGroups": groups,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_supplemental_groups_sorted_and_unique(minimal_config: Config) -> None:
    from app.models.identity import Group

    user = dataclasses.replace(
        RACHEL, groups=(Group("b", 3000), Group("a", 2500), Group("again", 3000), Group("p", 1101))
    )
    assert _pod(minimal_config, user)["spec"]["securityContext"]["supplementalGroups"] == [
        2500,
        3000,
    ]


def test_pod_level_settings(full_config: Config) -> None:
    pod = _pod(full_config)
    assert pod["metadata"]["name"] == "nb-rachel-lab"
    assert pod["metadata"]["namespace"] == "nublado-rachel"
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "lab"
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    assert spec["restartPolicy"] == "OnFailure"
    assert spec["nodeSelector"] == {"nublado.test/lab": "true"}
    assert spec["tolerations"] == [
        {"key": "nublado.test/lab", "operator": "Exists", "effect": "NoSchedule"},
        {
            "key": "spot",
            "operator": "Equal",
            "value": "yes",
            "effect": "NoExecute",
            "tolerationSeconds": 30,
        },
    ]
    assert [c["name"] for c in spec["containers"]] == ["notebook"]


def test_minimal_pod_leaves_out_unconfigured_parts(minimal_config: Config) -> None:
    pod = _pod(minimal_config, provision=True)
    spec = pod["spec"]
    for key in ("nodeSelector", "tolerations", "imagePullSecrets", "initContainers"):
        assert key not in spec
    container = spec["containers"][0]
    assert "command" not in container
    assert "args" not in container
    assert container["ports"] == [{"containerPort": 8888, "name": "lab", "protocol": "TCP"}]


def test_lab_container(full_config: Config) -> None:
    container = _pod(full_config, size="medium")["spec"]["containers"][0]
    assert container["image"] == f"registry.test/lsstsqre/sciplat-lab:w_2024_42@{DIGEST}"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["command"] == ["/opt/lsst/software/jupyterlab/runlab.sh"]
    assert container["args"] == ["--debug-startup"]
    assert container["ports"] == [{"containerPort": 8899, "name": "lab", "protocol": "TCP"}]
    assert container["resources"] == {
        "limits": {"cpu": "2", "memory": "8Gi"},
        "requests": {"cpu": "500m", "memory": "2Gi"},
    }
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }
    assert container["envFrom"] == [{"configMapRef": {"name": "nb-rachel-env"}}]
    assert container["env"] == [
        {
            "name": "ACCESS_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "nb-rachel", "key": "token"}},
        },
        {
            "name": "PGPASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "nb-rachel", "key": "postgres-password"}},
        },
    ]


def test_image_pinning() -> None:
    pinned = LabImage("registry.test:5000/lab:w_1", "w", DIGEST)
    assert image_reference(pinned) == f"registry.test:5000/lab:w_1@{DIGEST}"
    assert image_reference(dataclasses.replace(pinned, digest=None)) == "registry.test:5000/lab:w_1"
    already = LabImage(f"registry.test/lab@{DIGEST}", "w", DIGEST)
    assert image_reference(already) == f"registry.test/lab@{DIGEST}"


def test_volumes_and_mounts(full_config: Config) -> None:
    pod = _pod(full_config)
    assert pod["spec"]["volumes"] == [
        {"name": "home", "nfs": {"server": "nfs.test", "path": "/share/home", "readOnly": False}},
        {"name": "datasets", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}},
        {"name": "software", "hostPath": {"path": "/cvmfs"}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "spawner-nss", "configMap": {"name": "nb-rachel-nss"}},
        {"name": "spawner-secrets", "secret": {"secretName": "nb-rachel"}},
        {"name": "spawner-tmp", "emptyDir": {}},
    ]
    assert pod["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "home", "mountPath": "/home"},
        {"name": "datasets", "mountPath": "/datasets", "readOnly": True},
        {"name": "software", "mountPath": "/cvmfs", "subPath": "sw", "readOnly": True},
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "spawner-nss", "mountPath": "/etc/passwd", "subPath": "passwd", "readOnly": True},
        {"name": "spawner-nss", "mountPath": "/etc/group", "subPath": "group", "readOnly": True},
        {
            "name": "spawner-secrets",
            "mountPath": "/opt/lsst/software/jupyterlab/secrets",
            "readOnly": True,
        },
        {"name": "spawner-tmp", "mountPath": "/tmp"},
    ]


def test_configured_tmp_replaces_the_spawner_one() -> None:
    config = make_config(
        volumes=[{"name": "scratch", "type": "emptyDir"}],
        volumeMounts=[{"volumeName": "scratch", "mountPath": "/tmp"}],
    )
    pod = _pod(config)
    paths = [m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]]
    assert paths.count("/tmp") == 1
    assert "spawner-tmp" not in [v["name"] for v in pod["spec"]["volumes"]]


def test_reserved_volume_name_is_an_error() -> None:
    config = make_config(volumes=[{"name": "spawner-tmp", "type": "emptyDir"}])
    with pytest.raises(ValueError, match="reserved"):
        _pod(config)


def test_init_containers_only_when_provisioning(full_config: Config) -> None:
    assert "initContainers" not in _pod(full_config, provision=False)["spec"]
    init = _pod(full_config, WILE, provision=True)["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["provision-home", "welcome"]
    identity = [
        {"name": "USER", "value": "wile"},
        {"name": "UID", "value": "1102"},
        {"name": "GID", "value": "1500"},
        {"name": "HOME", "value": "/home/wile"},
    ]
    resources = {
        "limits": {"cpu": "2", "memory": "8Gi"},
        "requests": {"cpu": "500m", "memory": "2Gi"},
    }
    privileged, plain = init
    assert privileged == {
        "name": "provision-home",
        "image": "registry.test/provisioner:1.0",
        "imagePullPolicy": "IfNotPresent",
        "command": ["/provision"],
        "args": ["--home"],
        # No envFrom: the request's environment never reaches an init container.
        "env": [{"name": "PROVISION_MODE", "value": "create"}, *identity],
        "resources": resources,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "runAsUser": 0,
            "runAsGroup": 0,
            "runAsNonRoot": False,
        },
        "volumeMounts": [{"name": "home", "mountPath": "/home"}],
    }
    assert plain == {
        "name": "welcome",
        "image": "registry.test/welcome:1.0",
        "imagePullPolicy": "IfNotPresent",
        "env": identity,
        "resources": resources,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
        },
        "volumeMounts": [],
    }

"""Every object, for several users and configurations, against the official Kubernetes schemas.

The schemas catch misspelt or misplaced fields and wrong types; the API server also enforces rules
no schema states (unique names and mount paths, references that resolve, label syntax), so those
are checked here too.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.config import Config
from app.models.identity import UserInfo
from app.workloads.lab.builders import LabObjects, build_lab
from tests.builders.conftest import (
    COPIED,
    FULL_LAB,
    HUB_TOKEN,
    PULL_DATA,
    TOKEN,
    USERS,
    Validator,
    make_config,
    make_spec,
)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")

CONFIGS = {
    "full": FULL_LAB,
    "minimal": {},
    "no-policy": {"networkPolicy": {"enabled": False}, "port": 9000},
}


def _build(config: Config, user: UserInfo, provision: bool) -> LabObjects:
    copied = {s.secret_key: COPIED[s.secret_key] for s in config.lab.secrets}
    pull = PULL_DATA if config.lab.pull_secret else None
    spec = make_spec(
        config,
        user,
        env={"JUPYTERHUB_USER": user.username, "JUPYTERHUB_API_TOKEN": HUB_TOKEN},
        debug=provision,
    )
    return build_lab(
        spec, config, token=TOKEN, copied_secrets=copied, pull_secret_data=pull, provision=provision
    )


def _unique(values: list[Any], what: str) -> None:
    assert len(values) == len(set(values)), f"duplicate {what}: {values}"


def _check_api_rules(objects: LabObjects) -> None:
    """Rules the API server enforces beyond the schema."""
    for obj in objects.all():
        meta = obj["metadata"]
        assert _DNS_LABEL.match(meta["name"]), meta["name"]
        assert len(meta["name"]) <= 63
        for value in meta["labels"].values():
            assert len(value) <= 63
            assert _LABEL_VALUE.match(value), value
    pod = objects.pod["spec"]
    containers = pod.get("initContainers", []) + pod["containers"]
    _unique([c["name"] for c in containers], "container names")
    volumes = [v["name"] for v in pod["volumes"]]
    _unique(volumes, "volume names")
    config_maps = {objects.env_config_map["metadata"]["name"]: objects.env_config_map}
    config_maps[objects.nss_config_map["metadata"]["name"]] = objects.nss_config_map
    for volume in pod["volumes"]:
        if "configMap" in volume:
            assert volume["configMap"]["name"] in config_maps
        if "secret" in volume:
            assert volume["secret"]["secretName"] == objects.secret["metadata"]["name"]
    for container in containers:
        mounts = container["volumeMounts"]
        _unique([m["mountPath"] for m in mounts], "mount paths")
        assert {m["name"] for m in mounts} <= set(volumes)
        _unique([e["name"] for e in container["env"]], "env names")
        for env in container["env"]:
            assert _ENV_NAME.match(env["name"])
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            if ref is not None:
                assert ref["name"] == objects.secret["metadata"]["name"]
                assert ref["key"] in objects.secret["data"]
        for source in container.get("envFrom", []):
            assert source["configMapRef"]["name"] in config_maps
    for key in objects.env_config_map["data"]:
        assert _ENV_NAME.match(key)
    for pull in pod.get("imagePullSecrets", []):
        assert objects.pull_secret is not None
        assert pull["name"] == objects.pull_secret["metadata"]["name"]


@pytest.mark.parametrize("provision", [False, True], ids=["respawn", "first-spawn"])
@pytest.mark.parametrize("user", USERS, ids=lambda u: u.username)
@pytest.mark.parametrize("config_name", sorted(CONFIGS))
def test_objects_match_kubernetes_schemas(
    validate_object: Validator, config_name: str, user: UserInfo, provision: bool
) -> None:
    config = make_config(**CONFIGS[config_name])
    objects = _build(config, user, provision)
    for obj in objects.all():
        validate_object(obj)
    _check_api_rules(objects)
    assert ("initContainers" in objects.pod["spec"]) == (
        provision and bool(config.lab.init_containers)
    )


def test_validator_rejects_a_wrong_object(validate_object: Validator) -> None:
    objects = _build(make_config(), USERS[0], False)
    pod = objects.pod
    broken = {**pod, "spec": {**pod["spec"], "restartpolicy": "Always"}}
    with pytest.raises(pytest.fail.Exception, match="restartpolicy"):
        validate_object(broken)

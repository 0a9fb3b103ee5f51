"""The objects a spawn creates, read back from the emulated cluster."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.config import Config, parse_config
from devstack.gafaelfawr import GroupSpec
from devstack.kube import KubernetesEmulator
from tests.labs.conftest import LabUser, read_events

ARGOCD_LABEL = ("argocd.argoproj.io/instance", "nublado-users")
ARGOCD_ANNOTATIONS = {
    "argocd.argoproj.io/compare-options": "IgnoreExtraneous",
    "argocd.argoproj.io/sync-options": "Prune=false",
}


@pytest.fixture
def objects_client(
    lab_raw_config: dict[str, Any], make_app: Callable[[Config], Flask], kube: KubernetesEmulator
) -> FlaskClient:
    lab = lab_raw_config["lab"]
    lab["env"] = {"CONFIGURED": "deployment", "MEM_LIMIT": "from-config"}
    lab["secrets"] = [{"secretName": "lab-copied", "secretKey": "butler", "env": "BUTLER_KEY"}]
    if kube.store.get("namespaces", None, "nublado") is None:
        kube.store.create("namespaces", {"metadata": {"name": "nublado"}})
    if kube.store.get("secrets", "nublado", "lab-copied") is None:
        kube.store.create(
            "secrets",
            {
                "metadata": {"name": "lab-copied", "namespace": "nublado"},
                "data": {"butler": base64.b64encode(b"butler-secret").decode()},
            },
        )
    return make_app(parse_config(lab_raw_config)).test_client()


def _spawn(client: FlaskClient, user: LabUser, env: dict[str, str]) -> None:
    body = {"options": {"image": "registry.test/lsstsqre/sciplat-lab:w_2024_42", "size": "large"}}
    response = client.post(
        f"/spawner/v1/labs/{user.username}/spawn", json={**body, "env": env}, headers=user.headers
    )
    assert response.status_code == 303
    assert read_events(client, user.username, user.headers)[-1].type == "complete"


def _namespace_objects(kube: KubernetesEmulator, namespace: str) -> list[dict[str, Any]]:
    kinds = ["configmaps", "secrets", "services", "pods", "resourcequotas", "networkpolicies"]
    found = [o for kind in kinds for o in kube.store.list(kind, namespace)]
    ours = [
        o
        for o in found
        if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "lab-spawner"
    ]
    namespace_object = kube.store.get("namespaces", None, namespace)
    assert namespace_object is not None
    return [namespace_object, *ours]


@pytest.mark.parametrize(
    ("primary_in_list", "expected_group"),
    [
        (True, "{user}:x:{gid}:\nscience:x:2002:{user}\n"),
        (False, "{user}:x:{gid}:\nstaff:x:1500:{user}\nscience:x:2002:{user}\n"),
    ],
)
def test_objects_for_users_with_and_without_gids(
    objects_client: FlaskClient,
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
    primary_in_list: bool,
    expected_group: str,
) -> None:
    if primary_in_list:
        # The default test user: its own group (its primary GID), science, and a group
        # without a GID.
        user = new_user()
    else:
        user = new_user(
            groups=(GroupSpec("staff", 1500), GroupSpec("no-gid"), GroupSpec("science", 2002))
        )
    env = {"JUPYTERHUB_API_URL": "http://hub/api", "SITE": "request"}
    _spawn(objects_client, user, env)
    namespace = f"nublado-{user.username}"
    objects = _namespace_objects(kube, namespace)
    assert {o["kind"] for o in objects} == {
        "Namespace",
        "ConfigMap",
        "Secret",
        "Service",
        "Pod",
        "ResourceQuota",
        "NetworkPolicy",
    }
    for obj in objects:
        metadata = obj["metadata"]
        assert metadata["labels"][ARGOCD_LABEL[0]] == ARGOCD_LABEL[1], metadata["name"]
        for key, value in ARGOCD_ANNOTATIONS.items():
            assert metadata["annotations"][key] == value, metadata["name"]
        if obj["kind"] != "Namespace":
            assert metadata["name"].startswith(f"nb-{user.username}")

    nss = kube.store.get("configmaps", namespace, f"nb-{user.username}-nss")
    assert nss is not None
    passwd_line = f"{user.username}:x:{user.uid}:{user.gid}::/home/{user.username}:/bin/bash\n"
    assert nss["data"]["passwd"].endswith(passwd_line)
    group = nss["data"]["group"]
    expected = expected_group.format(user=user.username, gid=user.gid)
    assert group.endswith(expected), group
    assert "no-gid" not in group

    env_map = kube.store.get("configmaps", namespace, f"nb-{user.username}-env")
    assert env_map is not None
    data = env_map["data"]
    assert data["JUPYTERHUB_API_URL"] == "http://hub/api"  # from the request
    assert data["SITE"] == "request"
    assert data["CPU_LIMIT"] == "4.0"  # the service's value
    assert data["MEM_LIMIT"] == "from-config"  # configuration beats the service
    assert data["CONFIGURED"] == "deployment"
    assert data["IMAGE_DESCRIPTION"] == "Weekly 2024_42"

    secret = kube.store.get("secrets", namespace, f"nb-{user.username}")
    assert secret is not None
    assert base64.b64decode(secret["data"]["token"]).decode() == user.token
    assert base64.b64decode(secret["data"]["butler"]) == b"butler-secret"
    for obj in objects:
        if obj["kind"] != "Secret":
            assert user.token not in str(obj)

    pod = kube.store.get("pods", namespace, f"nb-{user.username}-lab")
    assert pod is not None
    spec = pod["spec"]
    security = spec["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"]) == (user.uid, user.gid)
    assert security["runAsNonRoot"] is True
    expected_supplemental = [2002] if primary_in_list else [1500, 2002]
    assert sorted(security.get("supplementalGroups", [])) == expected_supplemental
    assert spec["automountServiceAccountToken"] is False
    container = spec["containers"][0]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["envFrom"] == [{"configMapRef": {"name": f"nb-{user.username}-env"}}]
    assert not any("value" in e for e in container.get("env", []))
    env_from_secret = {e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in container["env"]}
    assert env_from_secret["BUTLER_KEY"] == "butler"
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/etc/passwd", "/etc/group"} <= mounts
    assert container["resources"]["limits"] == {"cpu": "4", "memory": "16Gi"}


# Each name that changes how a process starts or what code it loads, with a value that would
# show wherever it landed; and one Kubernetes sets in every container.
DROPPED_ENV = {
    name: f"/tmp/planted-{name.lower()}"
    for name in (
        "PATH",
        "PYTHONPATH",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "GCONV_PATH",
        "LOCPATH",
        "GLIBC_TUNABLES",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "NLSPATH",
        "BASH_ENV",
        "HOME",
        "KUBERNETES_SERVICE_HOST",
    )
}


def test_a_spawn_with_platform_and_startup_names_goes_on_and_says_what_it_dropped(
    lab_raw_config: dict[str, Any],
    make_app: Callable[[Config], Flask],
    new_user: Callable[..., LabUser],
    kube: KubernetesEmulator,
) -> None:
    """JupyterHub's environment (its limits, the hub's own PATH and PYTHONPATH) is screened,
    not refused; no name of it reaches an init container, which reads only its allow-list."""
    lab = lab_raw_config["lab"]
    lab["env"] = {"SITE": "configured"}
    lab["initContainers"] = [
        {"name": "provision", "image": "registry.test/provision:1.0", "privileged": True},
        {"name": "welcome", "image": "registry.test/welcome:1.0", "env": {"GREETING": "hi"}},
    ]
    client = make_app(parse_config(lab_raw_config)).test_client()
    user = new_user()
    env = {
        **DROPPED_ENV,
        "MEM_LIMIT": "1073741824",
        "CPU_LIMIT": "0.5",
        "SITE": "from-request",
        "ACCESS_TOKEN": "not-the-token",
        "LANG": "C.UTF-8",
    }
    body = {"options": {"image": "registry.test/lsstsqre/sciplat-lab:w_2024_42", "size": "small"}}
    response = client.post(
        f"/spawner/v1/labs/{user.username}/spawn", json={**body, "env": env}, headers=user.headers
    )
    assert response.status_code == 303, response.get_json()
    events = read_events(client, user.username, user.headers)
    assert events[-1].type == "complete"
    assert events[0].data == "Lab creation requested"
    notice = events[1].data
    assert notice.startswith("From the request's environment: the platform sets ACCESS_TOKEN, ")
    assert "CPU_LIMIT, MEM_LIMIT, SITE (the request's values are replaced)" in notice
    dropped_startup = sorted(set(DROPPED_ENV) - {"KUBERNETES_SERVICE_HOST"})
    assert f"not passed to the lab: {', '.join(dropped_startup)} (they change how" in notice
    assert "KUBERNETES_SERVICE_HOST (Kubernetes sets them in every container)" in notice

    namespace = f"nublado-{user.username}"
    config_map = kube.store.get("configmaps", namespace, f"nb-{user.username}-env")
    assert config_map is not None
    data = config_map["data"]
    assert data["LANG"] == "C.UTF-8"
    assert (data["MEM_LIMIT"], data["CPU_LIMIT"], data["SITE"]) == (
        str(4 * 2**30),
        "1.0",
        "configured",
    )
    assert not set(DROPPED_ENV) & set(data)
    assert "ACCESS_TOKEN" not in data  # the Secret sets it, the request's value is nowhere

    pod = kube.store.get("pods", namespace, f"nb-{user.username}-lab")
    assert pod is not None
    init = pod["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["provision", "welcome"]
    for container in init:
        assert "envFrom" not in container
        names = {e["name"] for e in container["env"]}
        assert names <= {"USER", "UID", "GID", "HOME", "GREETING"}
        text = str(container)
        for name, value in env.items():
            assert value not in text, (container["name"], name)
    assert {e["name"]: e["value"] for e in init[1]["env"]}["HOME"] == f"/home/{user.username}"

    status = client.get("/spawner/v1/user-status", headers=user.headers).get_json()
    assert status["env"] == {"LANG": "C.UTF-8"}
    assert status["api"] == "dmtn-222"

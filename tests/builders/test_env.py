"""The merged environment and its ConfigMap."""

from __future__ import annotations

from app.builders.env import (
    KUBERNETES_REASON,
    PROVISIONING_ENV,
    STARTUP_REASON,
    format_cores,
    init_container_env,
    lab_env,
    platform_env_names,
    screen_request_env,
    spawner_env,
)
from app.config import Config
from app.workloads.lab.builders import build_lab
from tests.builders.conftest import COPIED, DIGEST, PULL_DATA, TOKEN, make_config, make_spec


def test_merge_order_request_then_spawner_then_configured() -> None:
    config = make_config(env={"MEM_LIMIT": "from-config", "SITE": "configured"})
    request = {
        "JUPYTERHUB_USER": "rachel",
        "CPU_LIMIT": "from-request",
        "MEM_LIMIT": "from-request",
        "SITE": "from-request",
        "IMAGE_DESCRIPTION": "from-request",
    }
    env = lab_env(make_spec(config, env=request), config)
    assert env["JUPYTERHUB_USER"] == "rachel"  # only the request sets it
    assert env["CPU_LIMIT"] == "2.0"  # the spawner beats the request
    assert env["IMAGE_DESCRIPTION"] == "Weekly 2024_42"
    assert env["MEM_LIMIT"] == "from-config"  # configuration beats everything
    assert env["SITE"] == "configured"


def test_spawner_values_and_formats(minimal_config: Config) -> None:
    env = lab_env(make_spec(minimal_config, size="medium", env={}), minimal_config)
    assert env == {
        "MEM_LIMIT": str(8 * 2**30),
        "MEM_GUARANTEE": str(2 * 2**30),
        "CPU_LIMIT": "2.0",
        "CPU_GUARANTEE": "0.5",
        "IMAGE_DIGEST": DIGEST,
        "IMAGE_DESCRIPTION": "Weekly 2024_42",
    }
    small = lab_env(make_spec(minimal_config, size="small", image=1, env={}), minimal_config)
    assert small["CPU_LIMIT"] == "1.0"
    assert small["CPU_GUARANTEE"] == "0.25"  # default request: a quarter of the limit
    assert small["MEM_GUARANTEE"] == str(2**30)
    assert small["IMAGE_DIGEST"] == ""  # image without a known digest


def test_cores_format() -> None:
    assert [format_cores(c) for c in (2, 0.5, 0.25, 1 / 3, 0.0004)] == [
        "2.0",
        "0.5",
        "0.25",
        "0.333",
        "0.0",
    ]


def test_option_switches_only_when_chosen(minimal_config: Config) -> None:
    plain = lab_env(make_spec(minimal_config), minimal_config)
    assert "DEBUG" not in plain
    assert "RESET_USER_ENV" not in plain
    both = lab_env(make_spec(minimal_config, debug=True, reset_user_env=True), minimal_config)
    assert both["DEBUG"] == "TRUE"
    assert both["RESET_USER_ENV"] == "TRUE"
    debug_only = lab_env(make_spec(minimal_config, debug=True), minimal_config)
    assert debug_only["DEBUG"] == "TRUE"
    assert "RESET_USER_ENV" not in debug_only


def test_hub_api_token_stays_out_of_the_environment(minimal_config: Config) -> None:
    request = {"JUPYTERHUB_API_TOKEN": "hub-secret", "JPY_API_TOKEN": "hub-secret", "A": "b"}
    env = lab_env(make_spec(minimal_config, env=request), minimal_config)
    assert env["A"] == "b"
    assert "JUPYTERHUB_API_TOKEN" not in env
    assert "JPY_API_TOKEN" not in env


def test_env_config_map(full_config: Config) -> None:
    spec = make_spec(full_config)
    objects = build_lab(
        spec,
        full_config,
        token=TOKEN,
        copied_secrets=COPIED,
        pull_secret_data=PULL_DATA,
        provision=False,
    )
    cm = objects.env_config_map
    assert cm["metadata"]["name"] == "nb-rachel-env"
    assert cm["data"] == lab_env(spec, full_config)
    assert list(cm["data"]) == sorted(cm["data"])
    # All plain variables come from the ConfigMap; the pod's env holds only Secret references.
    container = objects.pod["spec"]["containers"][0]
    assert container["envFrom"] == [{"configMapRef": {"name": "nb-rachel-env"}}]
    assert all("valueFrom" in e and "value" not in e for e in container["env"])


def test_the_platform_owns_what_the_spawner_the_secret_and_the_configuration_set() -> None:
    config = make_config(env={"SITE": "configured"})
    spec = make_spec(config, env={}, debug=True, reset_user_env=True)
    platform = platform_env_names(config)
    assert set(spawner_env(spec)) <= platform
    assert {"ACCESS_TOKEN", "SITE", "DEBUG", "RESET_USER_ENV"} <= platform
    assert not {"PATH", "JUPYTERHUB_API_URL", "LANG"} & platform


# JupyterHub 6's base Spawner.get_env() with mem_limit and cpu_limit set, and the env_keep
# default of JupyterHub 4 (which forwards the hub's own PATH, PYTHONPATH and the like).
HUB_ENV = {
    "PATH": "/opt/hub/bin:/usr/bin",
    "PYTHONPATH": "/opt/hub/lib",
    "CONDA_DEFAULT_ENV": "hub",
    "VIRTUAL_ENV": "/opt/hub",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "JUPYTERHUB_API_TOKEN": "hub-token",
    "JPY_API_TOKEN": "hub-token",
    "JUPYTERHUB_API_URL": "http://hub:8081/hub/api",
    "JUPYTERHUB_USER": "rachel",
    "MEM_LIMIT": "1073741824",
    "CPU_LIMIT": "0.5",
}


def test_a_hubs_default_environment_is_screened_not_refused() -> None:
    config = make_config(env={"SITE": "configured"})
    screened = screen_request_env({**HUB_ENV, "SITE": "from-request"}, config)
    assert screened.overridden == ("CPU_LIMIT", "MEM_LIMIT", "SITE")
    assert screened.dropped == {"PATH": STARTUP_REASON, "PYTHONPATH": STARTUP_REASON}
    assert set(screened.kept) == set(HUB_ENV) - {"PATH", "PYTHONPATH", "MEM_LIMIT", "CPU_LIMIT"}
    notice = screened.notice()
    assert notice is not None
    assert "the platform sets CPU_LIMIT, MEM_LIMIT, SITE" in notice
    assert f"not passed to the lab: PATH, PYTHONPATH ({STARTUP_REASON})" in notice
    assert screen_request_env({"LANG": "C"}, config).notice() is None


def test_startup_and_kubernetes_names_never_reach_the_lab(minimal_config: Config) -> None:
    request = {
        "LD_PRELOAD": "/tmp/x.so",
        "LD_AUDIT": "/tmp/a.so",
        "GCONV_PATH": "/tmp/gconv",
        "LOCPATH": "/tmp/locale",
        "GLIBC_TUNABLES": "glibc.malloc.check=3",
        "SHELLOPTS": "xtrace",
        "BASHOPTS": "extdebug",
        "PS4": "$(id)",
        "NLSPATH": "/tmp/%N",
        "BASH_ENV": "/tmp/rc",
        "HOME": "/tmp",
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KEPT": "yes",
    }
    screened = screen_request_env(request, minimal_config)
    assert screened.kept == {"KEPT": "yes"}
    assert screened.dropped["KUBERNETES_SERVICE_HOST"] == KUBERNETES_REASON
    assert {r for n, r in screened.dropped.items() if n != "KUBERNETES_SERVICE_HOST"} == {
        STARTUP_REASON
    }
    # Even a spec that was never screened (an older lab's) builds a ConfigMap without them.
    env = lab_env(make_spec(minimal_config, env=request), minimal_config)
    assert not set(request) - {"KEPT"} & set(env)
    assert env["KEPT"] == "yes"


def test_init_containers_get_an_allow_list_only(full_config: Config) -> None:
    spec = make_spec(full_config, env={"GCONV_PATH": "/tmp/x", "USER": "mallory", "A": "1"})
    configured, plain = full_config.lab.init_containers
    env = init_container_env(configured, spec)
    assert env == {
        "PROVISION_MODE": "create",
        "USER": "rachel",  # whom it provisions wins over the configuration
        "UID": "1101",
        "GID": "1101",
        "HOME": "/home/rachel",
    }
    assert set(init_container_env(plain, spec)) == set(PROVISIONING_ENV)
    objects = build_lab(
        spec,
        full_config,
        token=TOKEN,
        copied_secrets=COPIED,
        pull_secret_data=PULL_DATA,
        provision=True,
    )
    for container in objects.pod["spec"]["initContainers"]:
        assert "envFrom" not in container
        assert {e["name"] for e in container["env"]} <= set(PROVISIONING_ENV) | {"PROVISION_MODE"}

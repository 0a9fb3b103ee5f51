"""The merged environment and its ConfigMap."""

from __future__ import annotations

from app.builders import lab_env
from app.builders.env import (
    format_cores,
    reserved_env_names,
    reserved_env_problem,
    spawner_env,
)
from app.builders.lab import build_lab
from app.config import Config
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


def test_what_the_spawner_sets_is_reserved() -> None:
    """Every name ``spawner_env`` can write, and those the Secret and the configuration set,
    are refused in a request; names JupyterHub passes are not."""
    config = make_config(env={"SITE": "configured"})
    spec = make_spec(config, env={}, debug=True, reset_user_env=True)
    reserved = reserved_env_names(config)
    assert set(spawner_env(spec)) <= reserved
    assert {"ACCESS_TOKEN", "SITE", "PATH", "LD_PRELOAD", "HOME"} <= reserved
    request = {"JUPYTERHUB_API_URL": "x", "JUPYTERHUB_API_TOKEN": "y", "LANG": "C"}
    assert reserved_env_problem(request, config) is None
    assert reserved_env_problem({**request, "KUBERNETES_PORT": "1"}, config) == "KUBERNETES_PORT"
    assert reserved_env_problem({"A": "1", "PATH": "/", "CPU_LIMIT": "9"}, config) == "CPU_LIMIT"

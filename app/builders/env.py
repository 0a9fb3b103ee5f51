"""The lab's environment and the ConfigMap ``nb-<user>-env`` that carries it.

DMTN-222 merges three sources, later ones winning: the spawn request's ``env`` (from JupyterHub),
the values the spawner derives from the lab's size, image and options, and the configured
``lab.env`` of the deployment. All of it lives in the ConfigMap, none of it in the pod spec, so a
human reads a lab's environment in one place.

Formats: ``MEM_LIMIT``/``MEM_GUARANTEE`` are bytes as an integer string (``"4294967296"``), as
JupyterHub's own spawners set them. ``CPU_LIMIT``/``CPU_GUARANTEE`` are cores as a decimal string
that always has a decimal point (``"2.0"``, ``"0.5"``, ``"0.25"``), rounded to the millicore the
container's resources are rounded to, so the environment states what the container really got.

The one exception to "everything from the request goes into the ConfigMap" is the JupyterHub API
token JupyterHub puts into the spawn environment (``JUPYTERHUB_API_TOKEN`` and its old alias
``JPY_API_TOKEN``): it is a credential, and ConfigMaps are readable by far more (Argo CD's UI
included) than Secrets. It goes into the lab Secret instead (see ``secret``).
"""

from __future__ import annotations

from typing import Any

from app.builders import names
from app.builders.metadata import object_meta
from app.config.models import Config
from app.models.lab import LabSpec

SECRET_REQUEST_ENV = ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN")
"""Request environment variables that are credentials: moved to the Secret, never a ConfigMap."""

TOKEN_ENV = "ACCESS_TOKEN"  # noqa: S105 - a variable name
"""The environment variable the lab reads the notebook token from (set from the lab Secret)."""

SPAWNER_ENV = (
    "MEM_LIMIT",
    "MEM_GUARANTEE",
    "CPU_LIMIT",
    "CPU_GUARANTEE",
    "IMAGE_DIGEST",
    "IMAGE_DESCRIPTION",
    "DEBUG",
    "RESET_USER_ENV",
)
"""Every variable ``spawner_env`` may set."""

PROVISIONING_ENV = ("USER", "UID", "GID", "HOME")
"""What init containers are told about whom they provision."""

STARTUP_ENV = (
    "PATH",
    "SHELL",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "BASH_ENV",
    "ENV",
)
"""Variables that change how the lab's processes start or what code they load: the image
sets them, and a request must not."""

RESERVED_ENV_PREFIXES = ("KUBERNETES_",)
"""Kubernetes sets these in every container (the API server's address)."""

TRUE = "TRUE"
"""How an option switch is spelled in the environment the lab's startup scripts read."""


def format_cores(cores: float) -> str:
    """Cores as ``"2.0"``/``"0.5"``: millicore-rounded, always with a decimal point."""
    return repr(round(cores * 1000) / 1000)


def public_request_env(spec: LabSpec) -> dict[str, str]:
    """The spawn request's environment without the credentials in it."""
    return {k: v for k, v in spec.env.items() if k not in SECRET_REQUEST_ENV}


def secret_request_env(spec: LabSpec) -> dict[str, str]:
    """The credentials of the spawn request's environment (they go to the lab Secret)."""
    return {k: spec.env[k] for k in SECRET_REQUEST_ENV if k in spec.env}


def reserved_env_names(config: Config) -> frozenset[str]:
    """Names a spawn request's ``env`` may not set: those the platform sets itself (the
    spawner, the lab Secret, the configured ``lab.env``, provisioning) and those that change
    how the lab starts. Besides these, any name starting with ``RESERVED_ENV_PREFIXES``."""
    return frozenset(
        {
            *SPAWNER_ENV,
            *PROVISIONING_ENV,
            *STARTUP_ENV,
            TOKEN_ENV,
            *(s.env for s in config.lab.secrets if s.env is not None),
            *config.lab.env,
        }
    )


def reserved_env_problem(env: dict[str, str], config: Config) -> str | None:
    """The first name in ``env`` the request may not set, if any."""
    reserved = reserved_env_names(config)
    for name in sorted(env):
        if name in reserved or name.startswith(RESERVED_ENV_PREFIXES):
            return name
    return None


def spawner_env(spec: LabSpec) -> dict[str, str]:
    """The variables the spawner itself sets, from the size, the image and the options."""
    env = {
        "MEM_LIMIT": str(spec.size.memory),
        "MEM_GUARANTEE": str(spec.size.memory_request),
        "CPU_LIMIT": format_cores(spec.size.cpu),
        "CPU_GUARANTEE": format_cores(spec.size.cpu_request),
        "IMAGE_DIGEST": spec.image.digest or "",
        "IMAGE_DESCRIPTION": spec.image.name,
    }
    if spec.options.debug:
        env["DEBUG"] = TRUE
    if spec.options.reset_user_env:
        env["RESET_USER_ENV"] = TRUE
    return env


def lab_env(spec: LabSpec, config: Config) -> dict[str, str]:
    """The merged environment: request < spawner-set < configured (credentials excluded)."""
    return {**public_request_env(spec), **spawner_env(spec), **config.lab.env}


def build_env_config_map(spec: LabSpec, config: Config, namespace: str) -> dict[str, Any]:
    """ConfigMap ``nb-<user>-env``, read by every container through ``envFrom``."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(
            names.object_name(spec.username, names.ENV_SUFFIX), spec.username, namespace=namespace
        ),
        "data": dict(sorted(lab_env(spec, config).items())),
    }

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

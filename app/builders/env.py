"""The lab's environment and the ConfigMap ``nb-<user>-env`` that carries it.

DMTN-222 merges three sources, later ones winning: the spawn request's ``env`` (JupyterHub's
``Spawner.get_env()``, unchanged), the values the spawner derives from the lab's size, image and
options, and the configured ``lab.env`` of the deployment. All of it lives in the ConfigMap, none
of it in the pod spec, so a human reads a lab's environment in one place.

A request is never refused for what it names, only for what cannot be a variable at all (the
request schema's bounds). Before the merge, ``screen_request_env`` sorts the request's names:

- names the platform sets (the spawner's values, the configured ``lab.env``, the variables read
  from the lab Secret) are *overridden*: the platform's value is what the lab gets;
- names that change how the lab's processes start or what code they load (``PATH``, the dynamic
  loader's, glibc's, the shells' and Python's start-up variables), and those Kubernetes sets in
  every container, are *dropped*: the image and the cluster set them, and a hub's own ``PATH``
  or ``PYTHONPATH`` (which JupyterHub's ``env_keep`` may forward) would break the lab;
- everything else reaches the lab.

The spawn's event stream names what was overridden and dropped. The request's environment goes
to the lab container only: provisioning init containers, which may run as root with the user's
home mounted, get a fixed allow-list (``init_container_env``), never the ConfigMap.

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

from dataclasses import dataclass
from typing import Any

from app.builders import names
from app.builders.metadata import lab_object
from app.builders.nss import require_ids
from app.models.config import Config, InitContainer
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
"""Every variable ``spawner_env`` may set. The platform owns them all: a switch the user did not
choose is absent from the lab, whatever the request says."""

PROVISIONING_ENV = ("USER", "UID", "GID", "HOME")
"""What init containers are told about whom they provision."""

STARTUP_ENV = (
    # Where programs and the shell's start-up come from.
    "PATH",
    "SHELL",
    "HOME",
    "ENV",
    "BASH_ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "IFS",
    "CDPATH",
    # glibc: character-set converters, locale data and message catalogues it loads, and its
    # tunables; host name resolution.
    "GCONV_PATH",
    "LOCPATH",
    "NLSPATH",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "RESOLV_HOST_CONF",
    # Python's start-up.
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "PYTHONPLATLIBDIR",
    "PYTHONINSPECT",
    # Other interpreters a lab may start, and their code injection switches.
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "RUBYLIB",
    "RUBYOPT",
    "NODE_OPTIONS",
    "NODE_PATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
)
"""Variables that change how the lab's processes start or what code they load: the image sets
them, and a request's are dropped."""

STARTUP_ENV_PREFIXES = ("LD_", "BASH_FUNC_")
"""The dynamic loader's variables (``LD_PRELOAD``, ``LD_LIBRARY_PATH``, ``LD_AUDIT``...) and
bash's exported functions: dropped like ``STARTUP_ENV``."""

KUBERNETES_ENV_PREFIXES = ("KUBERNETES_",)
"""Kubernetes sets these in every container (the API server's address): dropped."""

STARTUP_REASON = "they change how the lab's processes start or what code they load"
KUBERNETES_REASON = "Kubernetes sets them in every container"

TRUE = "TRUE"
"""How an option switch is spelled in the environment the lab's startup scripts read."""


@dataclass(frozen=True)
class ScreenedEnv:
    """A spawn request's environment, sorted (see the module's docstring)."""

    kept: dict[str, str]
    """What reaches the lab from the request (its credentials into the Secret)."""
    overridden: tuple[str, ...]
    """Names the platform sets: the request's values are replaced."""
    dropped: dict[str, str]
    """Names that reach no container, each with why."""

    def notice(self, noun: str = "lab") -> str | None:
        """One line for the event stream saying what did not reach the workload (``noun``)
        as sent; None when everything did."""
        parts = []
        if self.overridden:
            parts.append(
                f"the platform sets {', '.join(self.overridden)} "
                "(the request's values are replaced)"
            )
        by_reason: dict[str, list[str]] = {}
        for name, reason in self.dropped.items():
            by_reason.setdefault(reason, []).append(name)
        for reason, dropped in by_reason.items():
            parts.append(f"not passed to the {noun}: {', '.join(dropped)} ({reason})")
        if not parts:
            return None
        return "From the request's environment: " + "; ".join(parts)


def platform_env_names(config: Config) -> frozenset[str]:
    """Names the platform sets in every lab: the spawner's values, the variables read from
    the lab Secret and the configured ``lab.env``."""
    return frozenset(
        {
            *SPAWNER_ENV,
            TOKEN_ENV,
            *(s.env for s in config.lab.secrets if s.env is not None),
            *config.lab.env,
        }
    )


def drop_reason(name: str) -> str | None:
    """Why a request's variable ``name`` reaches no container; None if it may."""
    if name in STARTUP_ENV or name.startswith(STARTUP_ENV_PREFIXES):
        return STARTUP_REASON
    if name.startswith(KUBERNETES_ENV_PREFIXES):
        return KUBERNETES_REASON
    return None


def screen_request_env(
    env: dict[str, str],
    config: Config,
    *,
    also_set: frozenset[str] = frozenset(),
    also_set_prefixes: tuple[str, ...] = (),
) -> ScreenedEnv:
    """Sort a request's environment into what its workload gets, what the platform's values
    replace and what no container gets (see the module's docstring). ``also_set`` and
    ``also_set_prefixes`` name what the service sets on this workload besides a lab's
    platform variables (a remote kernel's ``KERNEL_*`` and ``POD_IP``)."""
    platform = platform_env_names(config) | also_set
    kept: dict[str, str] = {}
    overridden: list[str] = []
    dropped: dict[str, str] = {}
    for name in sorted(env):
        reason = drop_reason(name)
        if reason is not None:
            dropped[name] = reason
        elif name in platform or (also_set_prefixes and name.startswith(also_set_prefixes)):
            overridden.append(name)
        else:
            kept[name] = env[name]
    return ScreenedEnv(kept=kept, overridden=tuple(overridden), dropped=dropped)


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
    """The merged environment: request < spawner-set < configured (credentials excluded).

    The request's part is screened again here, so a spec from before the screening (an
    older lab's annotation) builds the same truthful ConfigMap: nothing the platform owns or
    drops comes from the request, and no variable the Secret sets is shown with another value.
    """
    request = screen_request_env(public_request_env(spec), config).kept
    return {**request, **spawner_env(spec), **config.lab.env}


def init_container_env(container: InitContainer, spec: LabSpec) -> dict[str, str]:
    """The whole environment of a provisioning init container: whom it provisions, and what
    its configuration names. Nothing from the request: it may run as root with the user's
    home mounted, so it reads no ConfigMap the request fills."""
    uid, gid = require_ids(spec.user)
    return {
        **container.env,
        "USER": spec.username,
        "UID": str(uid),
        "GID": str(gid),
        "HOME": f"/home/{spec.username}",
    }


def build_env_config_map(spec: LabSpec, config: Config, namespace: str) -> dict[str, Any]:
    """ConfigMap ``nb-<user>-env``, read by the lab container through ``envFrom``."""
    return {
        **lab_object("ConfigMap", spec.username, names.ENV_SUFFIX, namespace=namespace),
        "data": dict(sorted(lab_env(spec, config).items())),
    }

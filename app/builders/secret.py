"""The lab Secret ``nb-<user>`` and the optional pull Secret ``nb-<user>-pull``.

The Secret is the only object holding credentials: the delegated notebook token (key ``token``),
the keys copied from Secrets in the service's namespace, and the JupyterHub API token of the spawn
request (see ``env``). The pod mounts it read-only and maps some keys to environment variables.
"""

from __future__ import annotations

import base64
from typing import Any

from app.builders import names
from app.builders.env import TOKEN_ENV, secret_request_env
from app.builders.metadata import lab_object
from app.models.config import Config
from app.models.lab import LabSpec

TOKEN_KEY = "token"  # noqa: S105 - a key name
"""The Secret key of the delegated notebook token (DMTN-222)."""

PULL_SECRET_KEY = ".dockerconfigjson"  # noqa: S105 - a key name
PULL_SECRET_TYPE = "kubernetes.io/dockerconfigjson"  # noqa: S105 - a Secret type


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def secret_env(spec: LabSpec, config: Config) -> list[tuple[str, str]]:
    """``(variable, Secret key)`` pairs the lab container reads from the Secret, in order.

    The request's credentials are stored under their variable names as keys.

    Raises ``ValueError`` when two would set the same variable: a configuration error that must
    not silently pick one of the values.
    """
    pairs = [(TOKEN_ENV, TOKEN_KEY)]
    pairs.extend((variable, variable) for variable in secret_request_env(spec))
    pairs.extend((s.env, s.secret_key) for s in config.lab.secrets if s.env is not None)
    seen: set[str] = set()
    for variable, _ in pairs:
        if variable in seen:
            raise ValueError(f"environment variable {variable} is set from two Secret keys")
        seen.add(variable)
    return pairs


def build_secret(
    spec: LabSpec, config: Config, namespace: str, *, token: str, copied_secrets: dict[str, str]
) -> dict[str, Any]:
    """Secret ``nb-<user>`` (Opaque).

    ``copied_secrets`` maps each configured ``secretKey`` to its value as already base64-encoded
    in the source Secret's ``data``. Every configured key must be present: a lab started without
    one would fail later and less clearly. The service's own keys (``token`` and the request's
    credentials) win over copied keys of the same name.
    """
    missing = sorted({s.secret_key for s in config.lab.secrets} - set(copied_secrets))
    if missing:
        raise ValueError(f"copied secret keys missing: {', '.join(missing)}")
    data = dict(sorted(copied_secrets.items()))
    for variable, value in secret_request_env(spec).items():
        data[variable] = _b64(value)
    data[TOKEN_KEY] = _b64(token)
    return {
        **lab_object("Secret", spec.username, None, namespace=namespace),
        "type": "Opaque",
        "data": data,
    }


def build_pull_secret(
    spec: LabSpec, config: Config, namespace: str, pull_secret_data: dict[str, str] | None
) -> dict[str, Any] | None:
    """Secret ``nb-<user>-pull``, a copy of the configured pull Secret; None if none is configured.

    Pods can only use pull Secrets of their own namespace, hence the copy.
    """
    if config.lab.pull_secret is None:
        return None
    if pull_secret_data is None or PULL_SECRET_KEY not in pull_secret_data:
        raise ValueError(f"pull secret {config.lab.pull_secret} has no {PULL_SECRET_KEY} key")
    return {
        **lab_object("Secret", spec.username, names.PULL_SECRET_SUFFIX, namespace=namespace),
        "type": PULL_SECRET_TYPE,
        "data": {PULL_SECRET_KEY: pull_secret_data[PULL_SECRET_KEY]},
    }

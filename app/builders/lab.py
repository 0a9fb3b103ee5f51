"""All Kubernetes objects of a user's lab, built together from one spec.

Pure functions: the caller reads what lives elsewhere (the copied and pull Secrets, the delegated
token) and passes it in; the same input always gives the same objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.builders.env import build_env_config_map, lab_env
from app.builders.names import lab_namespace
from app.builders.namespace import build_namespace
from app.builders.network_policy import build_network_policy
from app.builders.nss import build_nss_config_map, group_file, passwd_file, require_ids
from app.builders.pod import build_pod
from app.builders.resource_quota import build_resource_quota, quotas
from app.builders.secret import build_pull_secret, build_secret
from app.builders.service import build_service, internal_url
from app.models.config import Config
from app.models.lab import LabSpec

__all__ = [
    "LabObjects",
    "build_lab",
    "group_file",
    "internal_url",
    "lab_env",
    "passwd_file",
    "quotas",
]


@dataclass(frozen=True)
class LabObjects:
    """A lab's objects; ``pull_secret`` and ``network_policy`` are None when not configured."""

    namespace: dict[str, Any]
    env_config_map: dict[str, Any]
    nss_config_map: dict[str, Any]
    secret: dict[str, Any]
    pull_secret: dict[str, Any] | None
    network_policy: dict[str, Any] | None
    resource_quota: dict[str, Any]
    service: dict[str, Any]
    pod: dict[str, Any]

    def in_creation_order(self) -> list[tuple[str, dict[str, Any]]]:
        """``(resource plural, object)`` pairs in the order to create them.

        The namespace first (everything else lives in it), the quota before anything it bounds,
        the ConfigMaps and Secrets before the pod that needs them, the pod last.
        """
        ordered: list[tuple[str, dict[str, Any] | None]] = [
            ("namespaces", self.namespace),
            ("resourcequotas", self.resource_quota),
            ("networkpolicies", self.network_policy),
            ("configmaps", self.env_config_map),
            ("configmaps", self.nss_config_map),
            ("secrets", self.secret),
            ("secrets", self.pull_secret),
            ("services", self.service),
            ("pods", self.pod),
        ]
        return [(plural, obj) for plural, obj in ordered if obj is not None]

    def all(self) -> list[dict[str, Any]]:
        """Every object, in creation order."""
        return [obj for _, obj in self.in_creation_order()]


def build_lab(
    spec: LabSpec,
    config: Config,
    *,
    token: str,
    copied_secrets: dict[str, str],
    pull_secret_data: dict[str, str] | None,
    provision: bool,
) -> LabObjects:
    """Build every object of ``spec``'s lab.

    ``token`` is the delegated notebook token (it ends up only in the Secret). ``copied_secrets``
    maps each configured ``secretKey`` to its base64 value read from the service namespace;
    ``pull_secret_data`` is the ``data`` of the configured pull Secret, or None when there is none.
    ``provision`` adds the configured init containers (the user's first spawn). Raises
    ``ValueError`` for a user without uid or gid and for inputs that contradict the configuration.
    """
    require_ids(spec.user)
    namespace = lab_namespace(config.namespace_prefix, spec.username)
    return LabObjects(
        namespace=build_namespace(spec, namespace),
        env_config_map=build_env_config_map(spec, config, namespace),
        nss_config_map=build_nss_config_map(spec, namespace),
        secret=build_secret(spec, config, namespace, token=token, copied_secrets=copied_secrets),
        pull_secret=build_pull_secret(spec, config, namespace, pull_secret_data),
        network_policy=build_network_policy(spec, config, namespace),
        resource_quota=build_resource_quota(spec, namespace),
        service=build_service(spec, config, namespace),
        pod=build_pod(spec, config, namespace, provision=provision),
    )

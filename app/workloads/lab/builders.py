"""All Kubernetes objects of a user's lab, built together from one spec.

Pure functions: the caller reads what lives elsewhere (the copied and pull Secrets, the delegated
token) and passes it in; the same input always gives the same objects. The Namespace and the
Service, which only a lab has, are built here; the lab's other objects come from the modules of
``app.builders``, whose pieces other kinds' objects share (a kernel's pod is the lab's user,
security, environment ConfigMap, volumes and ``passwd`` and ``group``).

The Namespace ``<prefix>-<user>`` holds everything of a user's lab. Deleting it removes every
other lab object at once. It carries the spec annotation too, so a lab whose pod is gone (or not
yet created) can still be described from Kubernetes alone.

The Service ``nb-<user>-lab`` is how JupyterHub reaches the lab. A Service rather than the pod
IP: its DNS name is known before the pod is scheduled, so ``internal_url`` can be answered at
spawn time and stays valid if the pod is recreated. How the hub names it (short name, fully
qualified, a proxy in front) is the operator's choice: ``lab.internalUrl``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.builders import names
from app.builders.env import build_env_config_map
from app.builders.metadata import lab_object, lab_selector, object_meta
from app.builders.network_policy import build_network_policy
from app.builders.nss import build_nss_config_map, require_ids
from app.builders.pod import build_pod
from app.builders.record import spec_annotation
from app.builders.resource_quota import build_resource_quota
from app.builders.secret import build_pull_secret, build_secret
from app.models.config import Config
from app.models.lab import LabSpec
from app.url_template import render, uses_service_address


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
    namespace = names.lab_namespace(config.namespace_prefix, spec.username)
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


def build_namespace(spec: LabSpec, namespace: str) -> dict[str, Any]:
    """The Namespace; no component label, as it will also hold the lab's Dask pools."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": object_meta(
            namespace,
            spec.username,
            namespace=None,
            component=None,
            annotations={names.SPEC_ANNOTATION: spec_annotation(spec)},
        ),
    }


def internal_url(config: Config, username: str, *, cluster_ip: str = "") -> str | None:
    """How JupyterHub reaches the lab: ``lab.internalUrl`` filled in for this user.

    By default ``http://nb-<user>-lab.<namespace>:<port>``, the Service's short DNS name. A
    template naming ``{cluster_ip}`` needs the address Kubernetes gave the Service
    (:func:`service_address`); without it there is no URL yet (None).
    """
    if uses_service_address(config.lab.internal_url) and not cluster_ip:
        return None
    return render(
        config.lab.internal_url,
        username=username,
        namespace=names.lab_namespace(config.namespace_prefix, username),
        service=names.object_name(username, names.LAB_SUFFIX),
        port=config.lab.port,
        cluster_ip=cluster_ip,
    )


def needs_service_address(config: Config) -> bool:
    """Whether ``internal_url`` needs the Service as Kubernetes has it (its cluster IP)."""
    return uses_service_address(config.lab.internal_url)


def service_address(service: dict[str, Any] | None) -> str:
    """The cluster IP of a Service as Kubernetes returned it; empty when it has none (not
    yet allocated, or a headless Service's ``None``)."""
    address = str(((service or {}).get("spec") or {}).get("clusterIP") or "")
    return "" if address == "None" else address


def build_service(spec: LabSpec, config: Config, namespace: str) -> dict[str, Any]:
    """A ClusterIP Service selecting the lab pod by user and component."""
    return {
        **lab_object("Service", spec.username, names.LAB_SUFFIX, namespace=namespace),
        "spec": {
            "type": "ClusterIP",
            "selector": lab_selector(spec.username),
            "ports": [
                {
                    "name": "lab",
                    "port": config.lab.port,
                    "targetPort": config.lab.port,
                    "protocol": "TCP",
                }
            ],
        },
    }

"""The Service ``nb-<user>-lab`` through which JupyterHub reaches the lab.

A Service rather than the pod IP: its DNS name is known before the pod is scheduled, so
``internal_url`` can be answered at spawn time and stays valid if the pod is recreated. How the
hub names it (short name, fully qualified, a proxy in front) is the operator's choice:
``lab.internalUrl``.
"""

from __future__ import annotations

from typing import Any

from app.builders import names
from app.builders.metadata import lab_selector, object_meta
from app.models.config import Config
from app.models.lab import LabSpec
from app.url_template import render, uses_service_address


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
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(
            names.object_name(spec.username, names.LAB_SUFFIX), spec.username, namespace=namespace
        ),
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

"""The NetworkPolicy ``nb-<user>-lab``: who may open connections to the lab.

Only pods of the lab's own namespace (its future Dask workers) and of the configured namespaces
(JupyterHub's proxy, the spawner) may connect; a user's lab is otherwise unreachable from other
users' labs. Egress is not restricted: labs need the internet and the platform's services.
"""

from __future__ import annotations

from typing import Any

from app.builders import names
from app.builders.metadata import lab_object, lab_selector
from app.models.config import Config
from app.models.lab import LabSpec

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by Kubernetes on every namespace to its name, so policies can select namespaces by name."""


def build_network_policy(spec: LabSpec, config: Config, namespace: str) -> dict[str, Any] | None:
    """The policy, or None when ``lab.networkPolicy.enabled`` is false."""
    policy = config.lab.network_policy
    if not policy.enabled:
        return None
    peers: list[dict[str, Any]] = [{"podSelector": {}}]
    peers.extend(
        {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}
        for name in policy.ingress_namespaces
    )
    return {
        **lab_object(
            "NetworkPolicy",
            spec.username,
            names.LAB_SUFFIX,
            namespace=namespace,
            api_version="networking.k8s.io/v1",
        ),
        "spec": {
            "podSelector": {"matchLabels": lab_selector(spec.username)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers}],
        },
    }

"""What every namespace gets shortly after it is created: the ``default`` ServiceAccount and
the ``kube-root-ca.crt`` ConfigMap.

A service that creates a pod right after its namespace can hit "serviceaccount default not
found" on a real cluster; the short delay before these appear keeps that race visible.
"""

from __future__ import annotations

import base64
import hashlib

from .cache import Obj

ROOT_CA_NAME = "kube-root-ca.crt"


def default_service_account(namespace: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": namespace},
    }


def root_ca_config_map(namespace: str) -> Obj:
    """The cluster CA bundle; its content is a stand-in, stable for the life of the process."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": ROOT_CA_NAME,
            "namespace": namespace,
            "annotations": {
                "kubernetes.io/description": (
                    "Contains a CA bundle that can be used to verify the kube-apiserver when using "
                    "internal endpoints such as the internal service IP or kubernetes.default.svc. "
                    "No other usage is guaranteed across distributions of Kubernetes clusters."
                )
            },
        },
        "data": {"ca.crt": _stand_in_certificate()},
    }


def _stand_in_certificate() -> str:
    body = base64.b64encode(hashlib.sha512(b"devstack emulated cluster CA").digest() * 6).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"

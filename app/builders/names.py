"""Names, labels and annotation keys of a user's lab objects.

Every module that builds or finds lab objects reads its names from here, so the service code that
looks objects up (watches, deletion, record rebuilding) and the builders can never disagree.
"""

from __future__ import annotations

OBJECT_PREFIX = "nb"
"""DMTN-222: objects inside a lab namespace are named ``nb-<user>-…`` so they sort together."""

LAB_CONTAINER = "notebook"
"""The name of the lab's container in its pod."""

# Suffixes of the objects inside a lab namespace (the Secret has none: ``nb-<user>``).
ENV_SUFFIX = "env"
NSS_SUFFIX = "nss"
PULL_SECRET_SUFFIX = "pull"  # noqa: S105 - a name suffix, not a password
LAB_SUFFIX = "lab"
QUOTA_SUFFIX = "quota"
KERNELS_SUFFIX = "kernels"
KERNEL_PREFIX = "kernel"
"""A kernel's pod and Secret are ``kernel-<kernel id>``: many per namespace, one per kernel."""

# Labels.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "lab-spawner"
USER_LABEL = "lab-spawner.jupyter.org/user"
COMPONENT_LABEL = "app.kubernetes.io/component"
LAB_COMPONENT = "lab"
KERNEL_COMPONENT = "kernel"
KERNEL_LABEL = "lab-spawner.jupyter.org/kernel"
"""On a kernel's pod and Secret: the kernel's id."""
ARGOCD_INSTANCE_LABEL = "argocd.argoproj.io/instance"
ARGOCD_INSTANCE = "nublado-users"

# Annotations.
ARGOCD_COMPARE_ANNOTATION = "argocd.argoproj.io/compare-options"
ARGOCD_COMPARE = "IgnoreExtraneous"
ARGOCD_SYNC_ANNOTATION = "argocd.argoproj.io/sync-options"
ARGOCD_SYNC = "Prune=false"
SPEC_ANNOTATION = "lab-spawner.jupyter.org/spec"
"""JSON of what is needed to rebuild a lab's record from Kubernetes (see ``metadata``)."""


def lab_namespace(prefix: str, username: str) -> str:
    """The namespace holding everything of one user's lab (``<prefix>-<user>``)."""
    return f"{prefix}-{username}"


def object_name(username: str, suffix: str | None = None) -> str:
    """``nb-<user>`` or ``nb-<user>-<suffix>``: the name of an object inside the lab namespace."""
    base = f"{OBJECT_PREFIX}-{username}"
    return f"{base}-{suffix}" if suffix else base


def kernel_name(kernel_id: str) -> str:
    """The name of a kernel's pod and Secret."""
    return f"{KERNEL_PREFIX}-{kernel_id}"

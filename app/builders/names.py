"""Names, labels and annotation keys of a user's lab objects.

Every module that builds or finds lab objects reads its names from here, so the service code that
looks objects up (watches, deletion, record rebuilding) and the builders can never disagree.
"""

from __future__ import annotations

import hashlib
import re

MAX_GROUP_LENGTH = 40
"""The longest group name kept as it is in a namespace's name (``<prefix>-apps-<group>``
must stay a DNS label of at most 63 characters)."""

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
OURS_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
"""Every object the service made."""
USER_LABEL = "lab-spawner.jupyter.org/user"
COMPONENT_LABEL = "app.kubernetes.io/component"
LAB_COMPONENT = "lab"
KERNEL_COMPONENT = "kernel"
KERNEL_LABEL = "lab-spawner.jupyter.org/kernel"
"""On a kernel's pod and Secret: the kernel's id."""
APP_COMPONENT = "app"
APP_LABEL = "lab-spawner.jupyter.org/app"
"""On every object of a group's app, and its pods: the app's id."""
GROUP_LABEL = "lab-spawner.jupyter.org/group"
"""On every object of a group's app, and on the group's namespace: the group, escaped to a
label value (see ``group_label_value``)."""
APP_PREFIX = "app"
"""An app's Deployment, Service, NetworkPolicy and ingress are ``app-<id>``."""
APPS_NAMESPACE_INFIX = "apps"
APPS_QUOTA = "apps-quota"
"""The ResourceQuota of a group's namespace: what all its apps may use."""
ADMIN_POD_COMPONENT = "admin-pod"
"""On the administrators' maintenance pod and its namespace: never a lab's component, and
no user label, so the lab watcher and its reconcile pass them by."""
ADMIN_POD_CONTAINER = "fsadmin"
"""The name of the maintenance pod's one container."""
POD_SECURITY_LABEL = "pod-security.kubernetes.io/enforce"
POD_SECURITY_PRIVILEGED = "privileged"
"""The Pod Security level of the maintenance pod's namespace: its pod runs as root, privileged."""
ARGOCD_INSTANCE_LABEL = "argocd.argoproj.io/instance"
ARGOCD_INSTANCE = "nublado-users"

# Annotations.
ARGOCD_COMPARE_ANNOTATION = "argocd.argoproj.io/compare-options"
ARGOCD_COMPARE = "IgnoreExtraneous"
ARGOCD_SYNC_ANNOTATION = "argocd.argoproj.io/sync-options"
ARGOCD_SYNC = "Prune=false"
SPEC_ANNOTATION = "lab-spawner.jupyter.org/spec"
APP_ANNOTATION = "lab-spawner.jupyter.org/app"
"""JSON of what the group chose for an app, on its Deployment, to rebuild its record."""
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


def group_label_value(group: str) -> str:
    """A group's name as a label value and a DNS label: lowercase letters, digits and '-'.

    A name that is one already is kept; any other is changed (other characters become '-')
    and given eight hex digits of its hash, so that two groups never share a namespace.
    """
    cleaned = re.sub(r"[^a-z0-9-]+", "-", group.lower()).strip("-")
    if cleaned == group and len(group) <= MAX_GROUP_LENGTH:
        return group
    digest = hashlib.sha256(group.encode()).hexdigest()[:8]
    return f"{cleaned[: MAX_GROUP_LENGTH - 9].strip('-')}-{digest}".strip("-")


def apps_namespace(prefix: str, group: str) -> str:
    """The namespace of a group's apps: ``<prefix>-apps-<group>``."""
    return f"{prefix}-{APPS_NAMESPACE_INFIX}-{group_label_value(group)}"


def app_name(app_id: str) -> str:
    """The name of an app's Deployment, Service, NetworkPolicy and ingress."""
    return f"{APP_PREFIX}-{app_id}"

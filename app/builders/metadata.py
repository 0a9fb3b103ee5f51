"""The labels and annotations every lab object carries.

The Argo CD label and annotations (DMTN-222 "Argo CD support") make all user objects show up under
the ``nublado-users`` application without Argo CD ever pruning them; the managed-by and user labels
let the service find every object of a user with one label selector.
"""

from __future__ import annotations

from typing import Any

from app.builders import names


def common_labels(username: str) -> dict[str, str]:
    """Labels on every object of a user's lab, the namespace included."""
    return {
        names.ARGOCD_INSTANCE_LABEL: names.ARGOCD_INSTANCE,
        names.MANAGED_BY_LABEL: names.MANAGED_BY,
        names.USER_LABEL: username,
    }


def lab_selector(username: str) -> dict[str, str]:
    """The labels that pick out a user's lab pod (and only it, not future Dask pods)."""
    return {names.USER_LABEL: username, names.COMPONENT_LABEL: names.LAB_COMPONENT}


def common_annotations() -> dict[str, str]:
    """Annotations on every object: Argo CD shows them but neither diffs nor prunes them."""
    return {
        names.ARGOCD_COMPARE_ANNOTATION: names.ARGOCD_COMPARE,
        names.ARGOCD_SYNC_ANNOTATION: names.ARGOCD_SYNC,
    }


def object_meta(
    name: str,
    username: str,
    *,
    namespace: str | None,
    component: str | None = names.LAB_COMPONENT,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``metadata`` of a lab object; ``namespace`` is None for the (cluster-scoped) namespace."""
    labels = common_labels(username)
    if component is not None:
        labels[names.COMPONENT_LABEL] = component
    meta: dict[str, Any] = {
        "name": name,
        "labels": labels,
        "annotations": {**common_annotations(), **(annotations or {})},
    }
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def lab_object(
    kind: str,
    username: str,
    suffix: str | None,
    *,
    namespace: str,
    api_version: str = "v1",
    component: str | None = names.LAB_COMPONENT,
) -> dict[str, Any]:
    """The head of an object in a user's lab namespace: its API version, kind and metadata,
    named ``nb-<user>`` or ``nb-<user>-<suffix>``; its builder adds the body."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": object_meta(
            names.object_name(username, suffix), username, namespace=namespace, component=component
        ),
    }

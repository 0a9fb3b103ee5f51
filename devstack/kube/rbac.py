"""RBAC, as kube-apiserver's authorizer evaluates it: Roles and ClusterRoles say what may be
done, RoleBindings (in their namespace) and ClusterRoleBindings (everywhere) to whom.

A request is allowed when a rule of a role bound to the caller (a User by name, a Group it is
in, or a ServiceAccount) matches its verb, API group, resource (``resource/subresource`` for a
subresource; ``*`` and ``*/subresource`` match too) and, when the rule names any, the object's
name. The administrator (``system:masters``, see ``identity.py``) is allowed everything before
RBAC is asked. Every authenticated caller also holds what the API server's bootstrap policy
grants everyone: reading discovery and asking what it may do.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from devstack.kube.identity import User
from devstack.kube.store import Store

JsonObject = dict[str, Any]

_EVERYONE = "system:authenticated"
_BOOTSTRAP: tuple[tuple[str, list[JsonObject]], ...] = (
    (
        "system:basic-user",
        [
            {
                "verbs": ["create"],
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            },
            {
                "verbs": ["create"],
                "apiGroups": ["authentication.k8s.io"],
                "resources": ["selfsubjectreviews"],
            },
        ],
    ),
    (
        "system:discovery",
        [
            {
                "verbs": ["get"],
                "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*"],
            }
        ],
    ),
    (
        "system:public-info-viewer",
        [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version"]}],
    ),
)
"""The ClusterRoles a real cluster binds to every authenticated user, each through a
ClusterRoleBinding of the same name."""


@dataclass(frozen=True)
class Attributes:
    """What one request (or one access review) asks to do."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    """A non-resource request's URL path (then ``resource`` is empty)."""


@dataclass(frozen=True)
class _Grant:
    rules: list[JsonObject]
    reason: str


def decide(store: Store, user: User, asked: Attributes) -> tuple[bool, str]:
    """Whether ``user`` may do ``asked``, and why (kube-apiserver's reason text)."""
    if user.privileged:
        return True, ""
    for grant in _grants(store, user, asked.namespace):
        if any(_matches(rule, asked) for rule in grant.rules):
            return True, f"RBAC: allowed by {grant.reason}"
    return False, ""


def rules(store: Store, user: User, namespace: str) -> list[JsonObject]:
    """Every rule ``user`` holds in ``namespace`` (a SelfSubjectRulesReview's)."""
    if user.privileged:
        # The cluster-admin ClusterRole a real cluster binds to system:masters.
        return [
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
            {"verbs": ["*"], "nonResourceURLs": ["*"]},
        ]
    return [rule for grant in _grants(store, user, namespace) for rule in grant.rules]


def denial(user: User, asked: Attributes) -> str:
    """The message of the 403 for a request RBAC does not allow."""
    resource = asked.resource + (f"/{asked.subresource}" if asked.subresource else "")
    where = f'in the namespace "{asked.namespace}"' if asked.namespace else "at the cluster scope"
    return (
        f'User "{user.name}" cannot {asked.verb} resource "{resource}" in API group '
        f'"{asked.group}" {where}'
    )


def _grants(store: Store, user: User, namespace: str) -> Iterator[_Grant]:
    if _EVERYONE in user.groups:
        for name, bootstrap in _BOOTSTRAP:
            yield _Grant(bootstrap, f'ClusterRoleBinding "{name}" of ClusterRole "{name}"')
    bindings = [("ClusterRoleBinding", b) for b in store.list("clusterrolebindings")]
    if namespace:
        bindings += [("RoleBinding", b) for b in store.list("rolebindings", namespace)]
    for kind, binding in bindings:
        subject = next((s for s in binding.get("subjects") or [] if _holds(user, s)), None)
        if subject is None:
            continue
        ref = binding.get("roleRef") or {}
        role_kind, role_name = ref.get("kind"), str(ref.get("name") or "")
        if role_kind == "Role":
            role = store.get("roles", binding["metadata"].get("namespace"), role_name)
        else:
            role = store.get("clusterroles", None, role_name)
        if role is None:
            continue
        meta = binding["metadata"]
        where = f"{meta['name']}/{meta['namespace']}" if kind == "RoleBinding" else meta["name"]
        to = subject["name"]
        if subject.get("kind") == "ServiceAccount":
            to = f"{subject['name']}/{subject.get('namespace', '')}"
        yield _Grant(
            list(role.get("rules") or []),
            f'{kind} "{where}" of {role_kind} "{role_name}" to {subject.get("kind")} "{to}"',
        )


def _holds(user: User, subject: JsonObject) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(name == user.name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        return user.name == f"system:serviceaccount:{subject.get('namespace')}:{name}"
    return False


def _matches(rule: JsonObject, asked: Attributes) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and asked.verb not in verbs:
        return False
    if not asked.resource:
        return any(
            url == "*"
            or url == asked.path
            or (url.endswith("*") and asked.path.startswith(url[:-1]))
            for url in rule.get("nonResourceURLs") or []
        )
    groups = rule.get("apiGroups") or []
    if "*" not in groups and asked.group not in groups:
        return False
    combined = asked.resource + (f"/{asked.subresource}" if asked.subresource else "")
    resources = rule.get("resources") or []
    if not any(
        r in ("*", combined) or (asked.subresource and r == f"*/{asked.subresource}")
        for r in resources
    ):
        return False
    names = rule.get("resourceNames") or []
    return not names or asked.name in names

"""SelfSubjectAccessReview and SelfSubjectRulesReview: a caller asks what it may do.

``kubectl auth can-i <verb> <resource>`` creates a SelfSubjectAccessReview and prints its
``status.allowed``; ``--list`` creates a SelfSubjectRulesReview and prints the rules. Both are
answered from the RBAC the emulator enforces on the same caller (``rbac.py``) and never stored.
"""

from __future__ import annotations

from typing import Any

from devstack.kube import errors, rbac
from devstack.kube.identity import User
from devstack.kube.store import Store

JsonObject = dict[str, Any]

PLURALS = frozenset({"selfsubjectaccessreviews", "selfsubjectrulesreviews"})
_GROUP = "authorization.k8s.io"


def answer(store: Store, user: User, plural: str, body: Any) -> JsonObject:
    """The review ``body`` asks for, with its ``status`` filled in."""
    review = dict(body) if isinstance(body, dict) else {}
    spec = dict(review.get("spec") or {})
    if plural == "selfsubjectaccessreviews":
        status: JsonObject = _access(store, user, spec)
    else:
        status = _rules(store, user, spec)
    kind = (
        "SelfSubjectAccessReview"
        if plural == "selfsubjectaccessreviews"
        else "SelfSubjectRulesReview"
    )
    return {
        "kind": kind,
        "apiVersion": f"{_GROUP}/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": status,
    }


def _access(store: Store, user: User, spec: JsonObject) -> JsonObject:
    resource = spec.get("resourceAttributes")
    other = spec.get("nonResourceAttributes")
    if (resource is None) == (other is None):
        one = "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        cause = {"field": "spec.resourceAttributes", "reason": "FieldValueInvalid", "message": one}
        raise errors.invalid("SelfSubjectAccessReview", "", [cause], _GROUP)
    if resource is not None:
        asked = rbac.Attributes(
            verb=str(resource.get("verb") or ""),
            group=str(resource.get("group") or ""),
            resource=str(resource.get("resource") or ""),
            subresource=str(resource.get("subresource") or ""),
            namespace=str(resource.get("namespace") or ""),
            name=str(resource.get("name") or ""),
        )
    else:
        assert other is not None
        asked = rbac.Attributes(
            verb=str(other.get("verb") or ""), path=str(other.get("path") or "")
        )
    allowed, reason = rbac.decide(store, user, asked)
    return {"allowed": allowed, **({"reason": reason} if reason else {})}


def _rules(store: Store, user: User, spec: JsonObject) -> JsonObject:
    namespace = str(spec.get("namespace") or "")
    if not namespace:
        raise errors.bad_request("no namespace on request")
    resource_rules, other_rules = [], []
    for rule in rbac.rules(store, user, namespace):
        if rule.get("nonResourceURLs"):
            other_rules.append(
                {"verbs": rule.get("verbs") or [], "nonResourceURLs": rule["nonResourceURLs"]}
            )
        else:
            kept = ("verbs", "apiGroups", "resources", "resourceNames")
            resource_rules.append({key: rule[key] for key in kept if rule.get(key)})
    return {"resourceRules": resource_rules, "nonResourceRules": other_rules, "incomplete": False}

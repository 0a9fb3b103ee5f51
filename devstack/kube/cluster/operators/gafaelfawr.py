"""Gafaelfawr's operator, for ``GafaelfawrIngress`` (``gafaelfawr.lsst.io/v1alpha1``).

A GafaelfawrIngress holds an Ingress template and who may pass; Gafaelfawr's operator makes the
Ingress ``template.metadata.name`` beside it, owned by it, with the template's labels (plus
``app.kubernetes.io/managed-by: Gafaelfawr``), the template's rules and TLS under
``ingressClassName: nginx``, and the annotations that make ingress-nginx ask Gafaelfawr about
every request first: an ``auth-url`` on Gafaelfawr's cluster-internal URL (``/ingress/auth``
with the access rules as its query, or ``/ingress/anonymous``), the response headers to lift
into the proxied request, and a configuration snippet that hands Gafaelfawr's challenge and
error on to the client. The template's own annotations are kept unless Gafaelfawr sets the
same key. The object's ``status.create`` says whether the Ingress was created or updated.

The Ingress is rewritten when its annotations, labels, rules or TLS differ from what the object
asks (or another object owns it); deleting the object deletes it, as the garbage collector
would. Simplifications: scopes are not checked against a list of known scopes, an Ingress
deleted by hand is made again only on the object's next change, and an Ingress left behind by
a renamed template is deleted at once rather than with the object.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from devstack.kube.store import now_timestamp

from ..cache import Obj
from .base import Operator

NGINX = "nginx.ingress.kubernetes.io/"
AUTH_URL = NGINX + "auth-url"
AUTH_METHOD = NGINX + "auth-method"
AUTH_RESPONSE_HEADERS = NGINX + "auth-response-headers"
AUTH_SIGNIN = NGINX + "auth-signin"
AUTH_CACHE_KEY = NGINX + "auth-cache-key"
AUTH_CACHE_DURATION = NGINX + "auth-cache-duration"
CONFIGURATION_SNIPPET = NGINX + "configuration-snippet"

LIFTED_HEADERS = (
    "Authorization",
    "Cookie",
    "X-Auth-Request-Email",
    "X-Auth-Request-Service",
    "X-Auth-Request-Token",
    "X-Auth-Request-User",
)
"""What ingress-nginx copies from Gafaelfawr's answer into the proxied request, replacing (or,
when the answer lacks one, removing) the client's own: Gafaelfawr's identity headers, and the
Authorization and Cookie headers with Gafaelfawr's tokens taken out."""

_PASSED_ON = (
    ("auth_www_authenticate", "www_authenticate"),
    ("auth_status", "x_error_status"),
    ("auth_error_body", "x_error_body"),
    ("auth_retry_after", "retry_after"),
)
"""Headers of Gafaelfawr's answer that the snippet keeps in NGINX variables, for the error page
that gives the client Gafaelfawr's real status, body and challenge."""

MANAGED_BY = {"app.kubernetes.io/managed-by": "Gafaelfawr"}
CONDITION_TYPE = "ResourceCreated"


def snippet() -> str:
    """The NGINX configuration Gafaelfawr adds to a protected Ingress's location."""
    lines = [f"auth_request_set ${var} $upstream_http_{header};" for var, header in _PASSED_ON]
    lines.append("error_page 403 = @autherror;")
    return "\n".join(lines) + "\n"


def auth_query(config: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``/ingress/auth`` query for a GafaelfawrIngress's ``config``, in Gafaelfawr's order."""
    query: list[tuple[str, str]] = []
    if config.get("allowOptions"):
        query.append(("allow_options", "true"))
    if config.get("authType"):
        query.append(("auth_type", str(config["authType"])))
    delegate = config.get("delegate") or {}
    if "notebook" in delegate:
        query.append(("notebook", "true"))
    elif delegate.get("internal"):
        internal = delegate["internal"]
        query.append(("delegate_to", str(internal.get("service") or "")))
        query.extend(("delegate_scope", str(s)) for s in internal.get("scopes") or [])
    if delegate.get("minimumLifetime"):
        query.append(("minimum_lifetime", str(int(delegate["minimumLifetime"]))))
    if delegate.get("useAuthorization"):
        query.append(("use_authorization", "true"))
    scopes = config.get("scopes") or {}
    if "any" in scopes:
        query.extend(("scope", str(s)) for s in scopes["any"])
        query.append(("satisfy", "any"))
    else:
        query.extend(("scope", str(s)) for s in scopes.get("all") or [])
    if config.get("service"):
        query.append(("service", str(config["service"])))
    if config.get("username"):
        query.append(("username", str(config["username"])))
    return query


def is_anonymous(config: dict[str, Any]) -> bool:
    return bool((config.get("scopes") or {}).get("anonymous"))


def ingress_annotations(
    config: dict[str, Any], template_annotations: dict[str, str], gafaelfawr_url: str
) -> dict[str, str]:
    """The Ingress's annotations: the template's, overridden by Gafaelfawr's own."""
    base = gafaelfawr_url.rstrip("/")
    result = dict(template_annotations)
    result[AUTH_METHOD] = "GET"
    result[AUTH_RESPONSE_HEADERS] = ",".join(LIFTED_HEADERS)
    if is_anonymous(config):
        result[AUTH_URL] = f"{base}/ingress/anonymous"
        return result
    result[AUTH_URL] = f"{base}/ingress/auth?" + urlencode(auth_query(config), safe=":/")
    own = template_annotations.get(CONFIGURATION_SNIPPET, "")
    if own and not own.endswith("\n"):
        own += "\n"
    result[CONFIGURATION_SNIPPET] = own + snippet()
    if config.get("authCacheDuration"):
        result[AUTH_CACHE_KEY] = "$request_method$http_cookie$http_authorization"
        result[AUTH_CACHE_DURATION] = f"200 202 401 {config['authCacheDuration']}"
    if config.get("loginRedirect"):
        result[AUTH_SIGNIN] = f"{base}/login"
    return result


def desired_ingress(obj: Obj, gafaelfawr_url: str) -> dict[str, Any]:
    """The Ingress a GafaelfawrIngress asks for (without its owner reference)."""
    config = obj.get("config") or {}
    template = obj.get("template") or {}
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    ingress_spec: dict[str, Any] = {"ingressClassName": "nginx", "rules": spec.get("rules") or []}
    own_annotations = meta.get("annotations") or {}
    if spec.get("tls"):
        ingress_spec["tls"] = spec["tls"]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": str(meta.get("name") or ""),
            "namespace": obj["metadata"].get("namespace"),
            "labels": {**(meta.get("labels") or {}), **MANAGED_BY},
            "annotations": ingress_annotations(config, own_annotations, gafaelfawr_url),
        },
        "spec": ingress_spec,
        "status": {"loadBalancer": {}},
    }


def _differs(current: Obj, desired: dict[str, Any]) -> bool:
    """Gafaelfawr's test for rewriting an Ingress: its annotations, labels, rules or TLS."""
    have, want = current["metadata"], desired["metadata"]
    return (
        (have.get("annotations") or {}) != want["annotations"]
        or (have.get("labels") or {}) != want["labels"]
        or (current.get("spec") or {}).get("rules") != desired["spec"]["rules"]
        or (current.get("spec") or {}).get("tls") != desired["spec"].get("tls")
    )


class GafaelfawrIngressOperator(Operator):
    plural = "gafaelfawringresses"
    group = "gafaelfawr.lsst.io"
    version = "v1alpha1"
    kind = "GafaelfawrIngress"

    def on_object(self, event_type: str, obj: Obj) -> None:
        meta = obj["metadata"]
        namespace = str(meta.get("namespace"))
        if event_type == "DELETED" or meta.get("deletionTimestamp"):
            for ingress in self._owned(namespace, str(meta.get("uid"))):
                self._writer.delete("ingresses", namespace, ingress["metadata"]["name"])
            return
        self.reconcile(namespace, str(meta["name"]))

    def reconcile(self, namespace: str, name: str) -> None:
        obj = self._writer.store.get(self.plural, namespace, name)
        if obj is None:
            return
        uid = str(obj["metadata"].get("uid"))
        desired = desired_ingress(obj, self._settings.gafaelfawr_url)
        ingress_name = desired["metadata"]["name"]
        if not ingress_name:
            self._set_status(obj, "Failed", "template.metadata.name is required")
            return
        for stale in self._owned(namespace, uid):
            if stale["metadata"]["name"] != ingress_name:
                self._writer.delete("ingresses", namespace, stale["metadata"]["name"])
        desired["metadata"]["ownerReferences"] = [self.owner_reference(obj)]
        current = self._writer.store.get("ingresses", namespace, ingress_name)
        if current is None:
            self._admit("ingresses", desired)
            if self._writer.create("ingresses", desired) is not None:
                self._set_status(obj, "Created", "Ingress was created")
            return
        owned = any(r.get("uid") == uid for r in current["metadata"].get("ownerReferences") or [])
        if owned and not _differs(current, desired):
            return

        def rewrite(ingress: Obj) -> bool:
            ingress["metadata"].update(
                {k: desired["metadata"][k] for k in ("labels", "annotations", "ownerReferences")}
            )
            ingress["spec"] = desired["spec"]
            return True

        if self._writer.mutate("ingresses", namespace, ingress_name, rewrite) is not None:
            self._set_status(obj, "Updated", "Ingress was updated")

    def _owned(self, namespace: str, uid: str) -> list[Obj]:
        return [
            ingress
            for ingress in self._list("ingresses", namespace)
            if any(r.get("uid") == uid for r in ingress["metadata"].get("ownerReferences") or [])
        ]

    def _set_status(self, obj: Obj, reason: str, message: str) -> None:
        """``status.create``, as Gafaelfawr's handler (named ``create``) reports its result."""
        meta = obj["metadata"]
        condition = {
            "lastTransitionTime": now_timestamp(),
            "message": message,
            "observedGeneration": int(meta.get("generation") or 1),
            "reason": reason,
            "status": "False" if reason == "Failed" else "True",
            "type": CONDITION_TYPE,
        }

        def change(current: Obj) -> bool:
            status = current.setdefault("status", {})
            before = {k: v for k, v in (status.get("create") or {}).items() if k in condition}
            if {**before, "lastTransitionTime": condition["lastTransitionTime"]} == condition:
                return False  # said already: writing it again would only wake this operator
            status["create"] = condition
            return True

        namespace, name, uid = meta.get("namespace"), meta["name"], meta.get("uid")
        self._writer.mutate(self.plural, namespace, name, change, uid)

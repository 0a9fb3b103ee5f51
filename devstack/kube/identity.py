"""Who is calling: the service-account tokens the emulator issues, and everyone else.

The emulator's own kubeconfig, the stack's services and the tests present a token the API does
not check (or none): they are the cluster's administrator, in ``system:masters`` as a
cluster's admin kubeconfig is, and RBAC never stops them. A ServiceAccount's token, issued by
the TokenRequest API (``POST .../serviceaccounts/<name>/token``, which ``kubectl create
token`` calls), is the ServiceAccount: ``system:serviceaccount:<namespace>:<name>`` in the
``system:serviceaccounts`` groups, and RBAC decides what it may do (``rbac.py``).

Tokens are JWTs with the claims kube-apiserver puts in one, signed with HMAC by a key the
emulator makes at start (a real server signs with its service-account key pair). Like a bound
token, one stops working when it expires or its ServiceAccount is deleted; a token of this
issuer that fails those checks is a 401.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from devstack.kube import errors
from devstack.kube.store import Store

ISSUER = "https://kubernetes.default.svc.cluster.local"
"""The ``iss`` of the tokens, and their audience unless the request names others."""

_DEFAULT_SECONDS = 3600
_MIN_SECONDS = 600


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]

    @property
    def privileged(self) -> bool:
        """In ``system:masters``: allowed everything before RBAC is asked, as upstream."""
        return "system:masters" in self.groups


ADMIN = User("kubernetes-admin", ("system:masters", "system:authenticated"))


def service_account_user(namespace: str, name: str) -> User:
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
    return User(f"system:serviceaccount:{namespace}:{name}", (*groups, "system:authenticated"))


class Tokens:
    """Issues service-account tokens and tells who presents one."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._key = secrets.token_bytes(32)

    def request(self, namespace: str, name: str, body: Any) -> dict[str, Any]:
        """The answer to a TokenRequest for the ServiceAccount ``namespace/name``."""
        account = self._store.get("serviceaccounts", namespace, name)
        if account is None:
            raise errors.not_found("serviceaccounts", name)
        spec = dict((body or {}).get("spec") or {})
        seconds = int(spec.get("expirationSeconds") or _DEFAULT_SECONDS)
        if seconds < _MIN_SECONDS:
            cause = {
                "field": "spec.expirationSeconds",
                "reason": "FieldValueInvalid",
                "message": "may not specify a duration less than 10 minutes",
            }
            raise errors.invalid("TokenRequest", name, [cause], "authentication.k8s.io")
        audiences = list(spec.get("audiences") or [ISSUER])
        issued = int(time.time())
        claims = {
            "aud": audiences,
            "exp": issued + seconds,
            "iat": issued,
            "iss": ISSUER,
            "nbf": issued,
            "sub": service_account_user(namespace, name).name,
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": name, "uid": account["metadata"]["uid"]},
            },
        }
        expires = datetime.fromtimestamp(issued + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"audiences": audiences, "expirationSeconds": seconds},
            "status": {"token": self._sign(claims), "expirationTimestamp": expires},
        }

    def user(self, authorization: str) -> User:
        """Who presents the ``Authorization`` header: a ServiceAccount for a token issued
        here, the administrator for anything else; raises a 401 for a bad token of ours."""
        scheme, _, token = authorization.partition(" ")
        parts = token.strip().split(".")
        if scheme.lower() != "bearer" or len(parts) != 3:
            return ADMIN
        try:
            claims = json.loads(_unpad(parts[1]))
        except (ValueError, binascii.Error):
            return ADMIN
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER:
            return ADMIN
        signature = _pad(self._mac(f"{parts[0]}.{parts[1]}"))
        bound = (claims.get("kubernetes.io") or {}).get("serviceaccount") or {}
        namespace = str((claims.get("kubernetes.io") or {}).get("namespace") or "")
        account = self._store.get("serviceaccounts", namespace, str(bound.get("name") or ""))
        if (
            not hmac.compare_digest(signature, parts[2])
            or int(claims.get("exp") or 0) <= time.time()
            or account is None
            or account["metadata"].get("uid") != bound.get("uid")
        ):
            raise errors.ApiError(401, "Unauthorized", "Unauthorized")
        return service_account_user(namespace, account["metadata"]["name"])

    def _sign(self, claims: dict[str, Any]) -> str:
        header = _pad(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = _pad(json.dumps(claims, separators=(",", ":")).encode())
        return f"{header}.{payload}.{_pad(self._mac(f'{header}.{payload}'))}"

    def _mac(self, signed: str) -> bytes:
        return hmac.new(self._key, signed.encode(), hashlib.sha256).digest()


def _pad(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unpad(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

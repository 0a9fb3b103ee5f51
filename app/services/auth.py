"""Who may call what.

The ingress in front of the service already checks scopes, but the service is the only
holder of cluster permissions, so it verifies every token itself and never trusts a username
header that no verified token backs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from app.errors import AuthenticationError, PermissionDeniedError
from app.models.config import DEFAULT_ADMIN_POD_SCOPE, Config
from app.models.identity import ADMIN_SCOPE, Caller
from app.storage.gafaelfawr import GafaelfawrClient

EXEC_SCOPE = "exec:notebook"
"""Held by users' tokens; lets a user act on their own lab."""

USER_HEADER = "X-Auth-Request-User"
TOKEN_HEADER = "X-Auth-Request-Token"  # noqa: S105 (a header name)

SECURITY_SCHEME = "bearer"
"""The OpenAPI document's name for a Gafaelfawr token sent as a bearer token."""


class Headers(Protocol):
    """What authentication reads of a request's headers: a ``dict``, or werkzeug's
    ``Headers`` as they are (copying those walks the whole WSGI environ)."""

    def get(self, key: str, /) -> str | None: ...


@dataclass(frozen=True)
class Grant:
    """One way to be allowed: a scope, and whether the path's user must be the caller.

    A grant with a ``setting`` takes its scope from that configuration key (a dotted path,
    ``admin.pod.scope``, whose parts are the same in the YAML and the config objects) when a
    request is checked; ``scope`` is then the key's default, which the API document shows.
    Routes are declared at import time, before any configuration is loaded, so the scope an
    operator chose can only be read per request.
    """

    scope: str
    same_user: bool = False
    setting: str | None = None

    def resolved(self, config: Config) -> Grant:
        """This grant with its scope read from ``config`` when it has a setting."""
        if self.setting is None:
            return self
        return replace(self, scope=str(config.setting(self.setting)), setting=None)


ADMIN = Grant(ADMIN_SCOPE)
OWNER = Grant(EXEC_SCOPE, same_user=True)
ANY_USER = Grant(EXEC_SCOPE)
ADMIN_POD = Grant(DEFAULT_ADMIN_POD_SCOPE, setting="admin.pod.scope")
"""Who may start, read and delete the maintenance pod: a narrower scope than ``ADMIN``'s by
default (a root shell over every user's files), which a deployment may change."""


def bearer_token(headers: Headers) -> str | None:
    """The request's token: the ``Authorization`` bearer, else Gafaelfawr's header."""
    authorization = headers.get("Authorization") or ""
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if authorization:
        raise AuthenticationError("the Authorization header must be 'Bearer <token>'")
    delegated = (headers.get(TOKEN_HEADER) or "").strip()
    return delegated or None


class AuthService:
    """Authenticates requests against Gafaelfawr and applies route grants."""

    def __init__(self, gafaelfawr: GafaelfawrClient) -> None:
        self._gafaelfawr = gafaelfawr

    def authenticate(self, headers: Headers, *, with_user: bool = False) -> Caller:
        """The verified caller; ``with_user`` also fetches the user's identity (in the same
        round trips), for routes that act on it."""
        token = bearer_token(headers)
        if token is None:
            raise AuthenticationError("no token: send 'Authorization: Bearer <token>'")
        user = None
        if with_user:
            data, user = self._gafaelfawr.identity(token)
        else:
            data = self._gafaelfawr.token_info(token)
        claimed = headers.get(USER_HEADER)
        if claimed is not None and claimed != data.username:
            raise PermissionDeniedError(f"the {USER_HEADER} header does not match the token's user")
        return Caller(token=token, data=data, user=user)

    @staticmethod
    def authorize(caller: Caller, grants: tuple[Grant, ...], path_user: str | None) -> None:
        """Pass if any grant allows the caller; else explain what was missing."""
        for grant in grants:
            if grant.scope not in caller.data.scopes:
                continue
            if grant.same_user and path_user is not None and path_user != caller.username:
                continue
            return
        needed = " or ".join(sorted({g.scope for g in grants}))
        if any(g.scope in caller.data.scopes for g in grants):
            raise PermissionDeniedError(f"user {caller.username} may not act for user {path_user}")
        raise PermissionDeniedError(f"the token lacks the required scope: {needed}")

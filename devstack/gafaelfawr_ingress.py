"""The wire format of Gafaelfawr's ingress routes, as ingress-nginx's auth subrequest sees it.

``/ingress/auth`` and ``/ingress/anonymous`` are what every Ingress made from a
GafaelfawrIngress asks before a request reaches its backend. This module holds what those routes
read and write, free of the emulator's state: the query (:class:`AuthQuery`), where a request's
token is found (:func:`find_token`), the ``WWW-Authenticate`` challenges, and the ``Authorization``
and ``Cookie`` headers with Gafaelfawr's tokens taken out, which NGINX lifts into the proxied
request so a backend never sees a user's token. The emulator (``devstack.gafaelfawr``) decides.

The ``gafaelfawr`` cookie here holds the token itself; the real one holds the token in
encrypted session state. Either way a browser that logged in sends its token with every request.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from werkzeug.datastructures import MultiDict
from werkzeug.wrappers import Request, Response

COOKIE_NAME = "gafaelfawr"
NO_CACHE = {"Cache-Control": "no-cache, no-store"}

IsToken = Callable[[str], bool]


class QueryError(ValueError):
    """A query ``/ingress/auth`` refuses (a 422 in Gafaelfawr)."""


@dataclass(frozen=True)
class AuthQuery:
    """What one ``/ingress/auth`` call asks: the scopes a token needs and how they combine,
    who else must hold it, and which token (if any) to hand the backend."""

    scopes: frozenset[str]
    satisfy: str = "all"
    service: str | None = None
    username: str | None = None
    auth_type: str = "bearer"
    notebook: bool = False
    delegate_to: str | None = None
    delegate_scopes: frozenset[str] = frozenset()
    minimum_lifetime: int | None = None
    use_authorization: bool = False
    allow_options: bool = False
    """Whether an ``OPTIONS`` request that is not a CORS preflight (WebDAV's) passes without
    credentials (``allowOptions``); else it is refused."""

    @classmethod
    def parse(cls, args: MultiDict[str, str]) -> AuthQuery:
        satisfy = args.get("satisfy", "all")
        auth_type = args.get("auth_type", "bearer")
        if satisfy not in ("all", "any"):
            raise QueryError(f"satisfy must be all or any, not {satisfy!r}")
        if auth_type not in ("basic", "bearer"):
            raise QueryError(f"auth_type must be basic or bearer, not {auth_type!r}")
        notebook = _flag(args, "notebook")
        delegate_to = args.get("delegate_to") or None
        service = args.get("service") or None
        if notebook and delegate_to:
            raise QueryError("delegate_to cannot be set for notebook tokens")
        if service and delegate_to and service != delegate_to:
            raise QueryError("service must be the same as delegate_to")
        lifetime = args.get("minimum_lifetime")
        if lifetime is not None and not lifetime.isdigit():
            raise QueryError("minimum_lifetime must be a number of seconds")
        return cls(
            scopes=frozenset(args.getlist("scope")),
            satisfy=satisfy,
            service=service,
            username=args.get("username") or None,
            auth_type=auth_type,
            notebook=notebook,
            delegate_to=delegate_to,
            delegate_scopes=frozenset(args.getlist("delegate_scope")),
            minimum_lifetime=int(lifetime) if lifetime is not None else None,
            use_authorization=_flag(args, "use_authorization"),
            allow_options=_flag(args, "allow_options"),
        )

    def satisfied_by(self, scopes: Iterable[str]) -> bool:
        """Whether a token of ``scopes`` passes: all of the query's, or any one of them (so
        ``satisfy=any`` with no scope passes no token, as in Gafaelfawr)."""
        held = set(scopes)
        if self.satisfy == "any":
            return not held.isdisjoint(self.scopes)
        return held.issuperset(self.scopes)


def _flag(args: MultiDict[str, str], name: str) -> bool:
    return args.get(name, "false").lower() in ("true", "1", "yes", "on")


class MalformedCredential(ValueError):
    """An ``Authorization`` header Gafaelfawr cannot read (its ``invalid_request``)."""


def find_token(request: Request, is_token: IsToken) -> str | None:
    """The token a request carries: the ``gafaelfawr`` cookie's first, as Gafaelfawr prefers
    a browser's session, else the ``Authorization`` header's, as a bearer token or in either
    field of Basic credentials. Raises :class:`MalformedCredential` for a header it cannot read."""
    cookie = request.cookies.get(COOKIE_NAME)
    if cookie and is_token(cookie):
        return cookie
    header = request.headers.get("Authorization")
    if not header:
        return None
    scheme, _, credential = header.strip().partition(" ")
    credential = credential.strip()
    if not credential:
        raise MalformedCredential("Malformed Authorization header")
    if scheme.lower() == "bearer":
        return credential
    if scheme.lower() != "basic":
        raise MalformedCredential(f"Unknown Authorization type {scheme}")
    user, password = _basic(credential)
    if is_token(user):
        return user
    return password if is_token(password) else None


def _basic(credential: str) -> tuple[str, str]:
    try:
        decoded = base64.b64decode(credential, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise MalformedCredential("Invalid Basic auth string") from exc
    user, sep, password = decoded.strip().partition(":")
    if not sep:
        raise MalformedCredential("Invalid Basic auth string")
    return user, password


def clean_authorization(values: Iterable[str], is_token: IsToken) -> list[str]:
    """``Authorization`` headers without those that carry a Gafaelfawr token; others (a
    backend's own scheme) pass."""
    kept = []
    for value in values:
        scheme, _, credential = value.strip().partition(" ")
        credential = credential.strip()
        if scheme.lower() == "bearer" and is_token(credential):
            continue
        if scheme.lower() == "basic":
            try:
                if any(is_token(part) for part in _basic(credential)):
                    continue
            except MalformedCredential:
                pass
        kept.append(value)
    return kept


def clean_cookies(values: Iterable[str]) -> list[str]:
    """``Cookie`` headers without Gafaelfawr's cookie (a header left empty goes)."""
    kept = []
    for value in values:
        cookies = [c for c in value.split("; ") if c.partition("=")[0].strip() != COOKIE_NAME]
        if cookies:
            kept.append("; ".join(cookies))
    return kept


def challenge(
    auth_type: str,
    realm: str,
    *,
    error: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] = (),
) -> str:
    """A ``WWW-Authenticate`` value: ``Basic`` says only the realm; ``Bearer`` also says
    what was wrong (RFC 6750), and which scopes were needed."""
    if auth_type == "basic":
        return f'Basic realm="{realm}"'
    parts = [f'realm="{realm}"']
    if error:
        parts.append(f'error="{error}"')
    if description:
        parts.append(f'error_description="{description}"')
    needed = " ".join(sorted(scopes))
    if needed:
        parts.append(f'scope="{needed}"')
    return "Bearer " + ", ".join(parts)


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    response = Response(json.dumps(body), status=status, mimetype="application/json")
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def refusal(status: int, message: str, error: str, www_authenticate: str | None = None) -> Response:
    """A refusal NGINX can pass on: ingress-nginx's auth subrequest understands only 401 and
    403, so any other status is sent as 403 with the real one in ``X-Error-Status`` and the
    body in ``X-Error-Body``, which the Ingress's error page gives the client."""
    detail = [{"msg": message, "type": error}]
    headers = {
        **NO_CACHE,
        "X-Error-Status": str(status),
        "X-Error-Body": json.dumps({"detail": detail}),
    }
    if www_authenticate:
        headers["WWW-Authenticate"] = www_authenticate
    return json_response(status if status in (401, 403) else 403, {"detail": detail}, headers)


def missing_headers(request: Request, names: Iterable[str]) -> Response | None:
    """Gafaelfawr's 422 for required headers a request lacks (NGINX always sends them)."""
    missing = [n for n in names if n not in request.headers]
    if not missing:
        return None
    detail = [
        {"type": "missing", "loc": ["header", n.lower()], "msg": "Field required"} for n in missing
    ]
    return json_response(422, {"detail": detail})

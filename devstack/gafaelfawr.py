"""An emulator of Gafaelfawr's token and user-information API and of its ingress routes.

The service verifies every token itself against Gafaelfawr (token-info for the user and
scopes, user-info for uid, gid, groups and quota), so its tests need a Gafaelfawr that
speaks the real wire format: the same paths, JSON shapes, token syntax and 401 challenge.
The two read routes the service uses are emulated, plus a small ``/_emulator`` control
surface so tests against a standalone stack can issue tokens, map groups to scopes and
simulate an outage the same way in-process tests do through the Python API.

What the service puts behind Gafaelfawr (group apps) is reached through the ingress, which
asks ``/ingress/auth`` (or ``/ingress/anonymous``) about every request, as ingress-nginx asks
Gafaelfawr (``devstack.gafaelfawr_ingress``); ``/login`` and ``/logout`` stand in for the
browser login an Ingress with ``loginRedirect`` sends users to (``devstack.gafaelfawr_login``).

**Group mapping.** Gafaelfawr's ``groupMapping`` configuration grants scopes to the members
of groups: a user who logs in gets, in their session token, every scope mapped to one of their
groups, and the tokens made from that session carry them on. Here ``group_mapping`` (scope to
groups) is applied to every token when it is checked: a token's scopes are its own plus each
mapped scope one of its user's groups (from the user's ``UserSpec``) has, in token-info and in
``/ingress/auth`` alike. So membership decides who passes an Ingress that asks for such a scope,
and changing a user's groups or the mapping takes effect at once, where in Gafaelfawr it would
take a new login.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from devstack.gafaelfawr_ingress import (
    COOKIE_NAME,
    NO_CACHE,
    AuthQuery,
    MalformedCredential,
    QueryError,
    challenge,
    clean_authorization,
    clean_cookies,
    find_token,
    json_response,
    missing_headers,
    refusal,
)
from devstack.gafaelfawr_login import (
    bad_redirect,
    is_local_url,
    logged_in,
    logged_out,
    login_form,
)
from devstack.serving import ServedEmulator, ServerThread

__all__ = [
    "TOKEN_TYPES",
    "GafaelfawrEmulator",
    "GroupSpec",
    "NotebookQuotaSpec",
    "TokenSpec",
    "UserSpec",
    "derive_token",
    "format_token",
    "parse_token",
]

TOKEN_TYPES = frozenset({"session", "user", "notebook", "internal", "service"})
"""Token types Gafaelfawr knows; token-info reports one of them."""

_TOKEN_RE = re.compile(r"^gt-([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{22})$")

API_PREFIX = "/auth/api/v1"


@dataclass(frozen=True)
class GroupSpec:
    """A group membership; ``gid`` is None for groups without a GID, as in real data."""

    name: str
    gid: int | None = None


@dataclass(frozen=True)
class NotebookQuotaSpec:
    """The ``quota.notebook`` part of user-info: CPU equivalents and memory in GiB."""

    cpu: float
    memory: float
    spawn: bool = True


@dataclass(frozen=True)
class UserSpec:
    """Everything user-info reports about one user.

    Optional fields left as None are omitted from the response, the way Gafaelfawr omits
    them, so clients are exercised against users without a GID, quota, name or email.
    """

    username: str
    uid: int | None = None
    gid: int | None = None
    name: str | None = None
    email: str | None = None
    groups: tuple[GroupSpec, ...] = ()
    notebook_quota: NotebookQuotaSpec | None = None
    api_quota: Mapping[str, int] = field(default_factory=dict)

    def user_info(self) -> dict[str, Any]:
        """Render the user-info JSON body."""
        body: dict[str, Any] = {"username": self.username}
        for key in ("name", "email", "uid", "gid"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        body["groups"] = [
            {"name": g.name} if g.gid is None else {"name": g.name, "id": g.gid}
            for g in self.groups
        ]
        if self.notebook_quota is not None or self.api_quota:
            quota: dict[str, Any] = {"api": dict(self.api_quota)}
            if self.notebook_quota is not None:
                quota["notebook"] = {
                    "cpu": float(self.notebook_quota.cpu),
                    "memory": float(self.notebook_quota.memory),
                    "spawn": self.notebook_quota.spawn,
                }
            body["quota"] = quota
        return body


@dataclass(frozen=True)
class TokenSpec:
    """A token known to the emulator; ``token`` is the full ``gt-<key>.<secret>`` string.

    ``service`` is set on internal tokens, which Gafaelfawr delegates to a named service.
    """

    token: str
    username: str
    scopes: tuple[str, ...]
    token_type: str = "user"  # noqa: S105 (a token type, not a secret)
    created: int = 0
    expires: int | None = None
    service: str | None = None

    def __post_init__(self) -> None:
        if parse_token(self.token) is None:
            raise ValueError(f"not a Gafaelfawr token: {self.token!r}")
        if self.token_type not in TOKEN_TYPES:
            raise ValueError(f"unknown token type {self.token_type!r}")

    @property
    def key(self) -> str:
        """The public half of the token, which token-info reports as ``token``."""
        parsed = parse_token(self.token)
        assert parsed is not None
        return parsed[0]

    def token_info(self, scopes: Iterable[str] | None = None) -> dict[str, Any]:
        """Render the token-info JSON body (never includes the secret); ``scopes`` replaces
        the token's own (its effective scopes, group-mapped ones included)."""
        body: dict[str, Any] = {
            "token": self.key,
            "username": self.username,
            "token_type": self.token_type,
            "scopes": sorted(self.scopes if scopes is None else scopes),
            "created": self.created,
            "expires": self.expires,
        }
        if self.service is not None:
            body["service"] = self.service
        return body


GroupMapping = Mapping[str, Iterable[str]]
"""Scope to the groups whose members get it (Gafaelfawr's ``groupMapping``)."""


def mapped_scopes(mapping: Mapping[str, frozenset[str]], groups: Iterable[str]) -> set[str]:
    """The scopes ``mapping`` grants to a member of ``groups``."""
    member_of = set(groups)
    return {scope for scope, granted in mapping.items() if not granted.isdisjoint(member_of)}


def _b64_22(raw: bytes) -> str:
    """Encode 16 bytes as the 22 url-safe base64 characters Gafaelfawr uses."""
    return base64.urlsafe_b64encode(raw[:16]).decode("ascii").rstrip("=")


def format_token(key: str, secret: str) -> str:
    """Assemble a token string in Gafaelfawr's ``gt-<key>.<secret>`` format."""
    return f"gt-{key}.{secret}"


def parse_token(token: str) -> tuple[str, str] | None:
    """Split a token into key and secret, or None when it is not in Gafaelfawr's format."""
    match = _TOKEN_RE.match(token)
    if match is None:
        return None
    return match.group(1), match.group(2)


def is_token(text: str) -> bool:
    """Whether ``text`` has a Gafaelfawr token's form (valid or not)."""
    return parse_token(text) is not None


def random_token() -> str:
    """A fresh random token, as Gafaelfawr issues them."""
    return format_token(_b64_22(secrets.token_bytes(16)), _b64_22(secrets.token_bytes(16)))


def derive_token(seed: str, name: str) -> str:
    """A token derived from a seed and a name, stable across runs.

    The demo stack uses this so the tokens printed by ``make run`` and pasted into a
    browser or a notebook stay valid after a restart.
    """
    mac = hmac.new(seed.encode(), name.encode(), hashlib.sha256).digest()
    return format_token(_b64_22(mac[:16]), _b64_22(mac[16:32]))


class GafaelfawrEmulator(ServedEmulator):
    """A thread-safe Gafaelfawr serving token-info, user-info and the ingress routes over
    loopback HTTP.

    ``clock`` returns the current epoch time; tests pass their own to expire tokens
    without sleeping. ``group_mapping`` maps scopes to the groups whose members get them.
    """

    _label = "Gafaelfawr emulator"

    def __init__(
        self,
        users: Iterable[UserSpec] = (),
        tokens: Iterable[TokenSpec] | Mapping[str, TokenSpec] = (),
        *,
        port: int = 0,
        realm: str = "gafaelfawr-emulator",
        clock: Callable[[], float] = time.time,
        group_mapping: GroupMapping | None = None,
    ) -> None:
        self._lock = threading.RLock()
        self._users: dict[str, UserSpec] = {}
        self._tokens: dict[str, TokenSpec] = {}
        self._group_mapping: dict[str, frozenset[str]] = {}
        self._delegated: dict[tuple[str, str, frozenset[str]], str] = {}
        self._failure: int | None = None
        self._latency = 0.0
        self._requests: Counter[str] = Counter()
        self._in_flight = 0
        self._peak_in_flight = 0
        self._port = port
        self._realm = realm
        self._clock = clock
        self._server: ServerThread | None = None
        for user in users:
            self.add_user(user)
        values = tokens.values() if isinstance(tokens, Mapping) else tokens
        for spec in values:
            self.add_token(spec)
        self.set_group_mapping(group_mapping or {})
        self._map = Map(
            [
                Rule(f"{API_PREFIX}/token-info", endpoint="token-info", methods=["GET"]),
                Rule(f"{API_PREFIX}/user-info", endpoint="user-info", methods=["GET"]),
                Rule("/ingress/auth", endpoint="ingress-auth", methods=["GET"]),
                Rule("/ingress/anonymous", endpoint="ingress-anonymous", methods=["GET"]),
                Rule("/login", endpoint="login", methods=["GET", "POST"]),
                Rule("/logout", endpoint="logout", methods=["GET"]),
                Rule("/_emulator/fail", endpoint="control-fail", methods=["PUT"]),
                Rule("/_emulator/group-mapping", endpoint="control-group-mapping", methods=["PUT"]),
                Rule("/_emulator/tokens", endpoint="control-tokens", methods=["POST"]),
                Rule("/_emulator/requests", endpoint="control-requests", methods=["GET"]),
            ]
        )

    # Lifecycle -------------------------------------------------------------------

    # State -----------------------------------------------------------------------

    def add_user(self, user: UserSpec) -> None:
        """Add or replace a user's metadata."""
        with self._lock:
            self._users[user.username] = user

    def add_token(self, spec: TokenSpec) -> None:
        """Register a token with a known value (the demo's stable tokens)."""
        with self._lock:
            self._tokens[spec.key] = spec

    def issue_token(
        self,
        username: str,
        scopes: Iterable[str],
        token_type: str = "user",  # noqa: S107 (a token type, not a secret)
        expires: int | None = None,
        service: str | None = None,
    ) -> str:
        """Create a random token for ``username``; ``expires`` is epoch seconds or None."""
        with self._lock:
            spec = TokenSpec(
                token=random_token(),
                username=username,
                scopes=tuple(scopes),
                token_type=token_type,
                created=int(self._clock()),
                expires=expires,
                service=service,
            )
            self._tokens[spec.key] = spec
            return spec.token

    def set_group_mapping(self, mapping: GroupMapping) -> None:
        """Replace the group mapping: each scope to the groups whose members get it."""
        frozen = {str(scope): frozenset(map(str, groups)) for scope, groups in mapping.items()}
        with self._lock:
            self._group_mapping = frozen

    @property
    def group_mapping(self) -> dict[str, list[str]]:
        """A snapshot of the group mapping, groups sorted."""
        with self._lock:
            return {scope: sorted(groups) for scope, groups in self._group_mapping.items()}

    def effective_scopes(self, spec: TokenSpec) -> tuple[str, ...]:
        """The token's scopes plus those the group mapping grants its user, sorted."""
        with self._lock:
            user = self._users.get(spec.username)
            mapping = self._group_mapping
        groups = [g.name for g in user.groups] if user is not None else []
        return tuple(sorted(set(spec.scopes) | mapped_scopes(mapping, groups)))

    def revoke(self, token: str) -> None:
        """Forget a token so later calls with it get 401; unknown tokens are ignored."""
        parsed = parse_token(token)
        if parsed is None:
            return
        with self._lock:
            spec = self._tokens.get(parsed[0])
            if spec is not None and spec.token == token:
                del self._tokens[parsed[0]]

    def fail_with(self, status: int | None) -> None:
        """Answer every API call with ``status`` and a JSON error; None restores service."""
        if status is not None and not 400 <= status <= 599:
            raise ValueError("failure status must be an HTTP error status")
        with self._lock:
            self._failure = status

    def set_latency(self, seconds: float) -> None:
        """Delay every API response, to exercise the service's timeouts and caching."""
        with self._lock:
            self._latency = max(0.0, seconds)

    @property
    def requests(self) -> Counter[str]:
        """A snapshot of API calls served per route (``token-info``, ``user-info``)."""
        with self._lock:
            return Counter(self._requests)

    @property
    def in_flight(self) -> int:
        """API calls being served now."""
        with self._lock:
            return self._in_flight

    @property
    def peak_in_flight(self) -> int:
        """The most API calls being served at once since the last ``reset_requests``."""
        with self._lock:
            return self._peak_in_flight

    def reset_requests(self) -> None:
        """Zero the per-route counters and the peak of calls in flight."""
        with self._lock:
            self._requests.clear()
            self._peak_in_flight = self._in_flight

    # HTTP ------------------------------------------------------------------------

    def wsgi_app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """The WSGI entry point; usable on its own under any WSGI server."""
        request = Request(environ)
        response = self._dispatch(request)
        return response(environ, start_response)

    def _dispatch(self, request: Request) -> Response:
        adapter = self._map.bind_to_environ(request.environ)
        try:
            endpoint, _args = adapter.match()
        except NotFound:
            return _detail_response(404, "Not Found", "not_found")
        except MethodNotAllowed as exc:
            response = _detail_response(405, "Method Not Allowed", "method_not_allowed")
            response.headers["Allow"] = ", ".join(exc.valid_methods or [])
            return response
        except HTTPException as exc:
            return _detail_response(exc.code or 500, exc.name, "http_error")
        if endpoint.startswith("control-"):
            return self._control(endpoint, request)
        if endpoint in ("login", "logout"):
            return self._login(endpoint, request)
        with self._lock:
            self._requests[endpoint] += 1
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
            failure = self._failure
            latency = self._latency
        try:
            return self._answer(endpoint, request, failure, latency)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer(
        self, endpoint: str, request: Request, failure: int | None, latency: float
    ) -> Response:
        if latency:
            time.sleep(latency)
        if failure is not None:
            return _detail_response(failure, "Emulated Gafaelfawr failure", "emulated_failure")
        if endpoint == "ingress-auth":
            return self._ingress_auth(request)
        if endpoint == "ingress-anonymous":
            return self._ingress_anonymous(request)
        spec, problem = self._authenticate(request)
        if spec is None:
            return self._challenge(request, problem)
        if endpoint == "token-info":
            return _json_response(200, spec.token_info(self.effective_scopes(spec)))
        with self._lock:
            user = self._users.get(spec.username)
        body = user.user_info() if user is not None else {"username": spec.username, "groups": []}
        return _json_response(200, body)

    def _authenticate(self, request: Request) -> tuple[TokenSpec | None, str]:
        """Find the valid token behind the Authorization header, or say why there is none."""
        header = request.headers.get("Authorization")
        if not header:
            return None, "Authentication required"
        scheme, _, credential = header.partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            return None, "Unknown Authorization type"
        return self._verify(credential.strip())

    def _verify(self, token: str) -> tuple[TokenSpec | None, str]:
        """The valid token ``token`` is, or why it is none."""
        parsed = parse_token(token)
        if parsed is None:
            return None, "Token is malformed"
        key, secret = parsed
        with self._lock:
            spec = self._tokens.get(key)
        if spec is None:
            return None, "Token is not valid"
        expected = parse_token(spec.token)
        assert expected is not None
        if not hmac.compare_digest(expected[1], secret):
            return None, "Token is not valid"
        if spec.expires is not None and spec.expires <= self._clock():
            return None, "Token has expired"
        return spec, ""

    def _challenge(self, request: Request, description: str) -> Response:
        response = _detail_response(401, description, "invalid_token")
        realm = self._realm or request.host
        response.headers["WWW-Authenticate"] = (
            f'Bearer realm="{realm}", error="invalid_token", error_description="{description}"'
        )
        return response

    # Ingress -----------------------------------------------------------------------

    def _ingress_auth(self, request: Request) -> Response:
        """``/ingress/auth``: may the request NGINX describes pass the Ingress that asks?

        In Gafaelfawr's order: a token (401 without a valid one), its remaining lifetime, the
        scopes (403 ``insufficient_scope``), the username, the service quota; then 200 with
        the user's identity and the request's own credentials, Gafaelfawr's taken out.
        """
        missing = missing_headers(request, ("X-Original-URL", "X-Original-Method"))
        if missing is not None:
            return missing
        try:
            query = AuthQuery.parse(request.args)
        except QueryError as exc:
            return json_response(422, {"detail": [{"msg": str(exc), "type": "invalid_query"}]})
        if request.headers["X-Original-Method"].upper() == "OPTIONS":
            return self._ingress_options(request, query)
        realm = self._realm or request.host
        try:
            token = find_token(request, is_token)
        except MalformedCredential as exc:
            www = challenge(query.auth_type, realm, error="invalid_request", description=str(exc))
            return refusal(400, str(exc), "invalid_request", www)
        spec, problem = self._verify(token) if token else (None, "")
        if spec is None:
            return self._unauthorized(request, query, realm, problem)
        remaining = None if spec.expires is None else spec.expires - self._clock()
        if query.minimum_lifetime and remaining is not None and remaining < query.minimum_lifetime:
            return self._unauthorized(request, query, realm, "Remaining token lifetime too short")
        with self._lock:
            user = self._users.get(spec.username)
        if not query.satisfied_by(self.effective_scopes(spec)):
            return self._forbidden(query, realm, "Token missing required scope", query.scopes)
        if query.username and spec.username != query.username:
            return self._forbidden(query, realm, "Access not allowed for this user")
        if user is not None and query.service and user.api_quota.get(query.service) == 0:
            message = f"User {spec.username} not allowed to access service {query.service}"
            return self._forbidden(query, realm, message)
        response = json_response(200, {"status": "ok"})
        headers = response.headers
        headers.add("X-Auth-Request-User", spec.username)
        if user is not None and user.email:
            headers.add("X-Auth-Request-Email", user.email)
        if spec.service:
            headers.add("X-Auth-Request-Service", spec.service)
        delegated = self._delegate(spec, query)
        if delegated:
            headers.add("X-Auth-Request-Token", delegated)
        if query.use_authorization:
            if delegated:
                headers.add("Authorization", f"Bearer {delegated}")
        else:
            for value in clean_authorization(request.headers.getlist("Authorization"), is_token):
                headers.add("Authorization", value)
        for value in clean_cookies(request.headers.getlist("Cookie")):
            headers.add("Cookie", value)
        return response

    def _ingress_anonymous(self, request: Request) -> Response:
        """``/ingress/anonymous``: everyone passes; the request's credentials come back with
        Gafaelfawr's tokens and cookie taken out, so the backend never sees them."""
        response = json_response(200, {"status": "ok"})
        for value in clean_authorization(request.headers.getlist("Authorization"), is_token):
            response.headers.add("Authorization", value)
        for value in clean_cookies(request.headers.getlist("Cookie")):
            response.headers.add("Cookie", value)
        return response

    def _ingress_options(self, request: Request, query: AuthQuery) -> Response:
        """``OPTIONS`` is not authenticated: a CORS preflight (``Origin`` and
        ``Access-Control-Request-Method``) from this machine passes with the request's
        credentials cleaned, from another origin it is refused; any other ``OPTIONS`` (WebDAV's
        protocol negotiation) passes, with nothing more, only where the Ingress allows it
        (``allowOptions``), and is refused as a 404 otherwise, as is a preflight missing one
        of its two headers."""
        origin = request.headers.get("Origin")
        method = request.headers.get("Access-Control-Request-Method")
        if not origin or not method:
            if query.allow_options and not origin and not method:
                return json_response(200, {"status": "ok"})
            if query.allow_options:
                return refusal(404, "Malformed CORS request", "options_not_supported")
            message = "Non-CORS OPTIONS requests not supported"
            return refusal(404, message, "options_not_supported")
        if not is_local_url(origin):
            return refusal(403, "Cross-origin request not allowed", "cors_preflight_rejected")
        return self._ingress_anonymous(request)

    def _unauthorized(
        self, request: Request, query: AuthQuery, realm: str, problem: str
    ) -> Response:
        """Gafaelfawr's 401: a bare challenge when no token came, ``invalid_token`` for a bad
        one; a script's request (``X-Requested-With: XMLHttpRequest``) gets 403 instead, as a
        login redirect could not help it."""
        if problem:
            www = challenge(query.auth_type, realm, error="invalid_token", description=problem)
            body = {"detail": {"msg": problem, "type": "invalid_token"}}
        else:
            www = challenge(query.auth_type, realm)
            body = {"detail": {"msg": "Authentication required", "type": "no_authorization"}}
        script = request.headers.get("X-Requested-With", "").lower() == "xmlhttprequest"
        return json_response(403 if script else 401, body, {**NO_CACHE, "WWW-Authenticate": www})

    @staticmethod
    def _forbidden(
        query: AuthQuery, realm: str, message: str, scopes: Iterable[str] = ()
    ) -> Response:
        www = challenge(
            query.auth_type,
            realm,
            error="insufficient_scope",
            description=message,
            scopes=scopes,
        )
        return refusal(403, message, "insufficient_scope", www)

    def _delegate(self, parent: TokenSpec, query: AuthQuery) -> str | None:
        """The notebook or internal token the backend gets, if the Ingress asks for one: made
        from the request's token on first use and reused after, as Gafaelfawr caches them.
        An internal token carries the asked-for scopes the parent has, and the service."""
        if query.notebook:
            kind, scopes, service = "notebook", frozenset(parent.scopes), None
        elif query.delegate_to:
            held = set(self.effective_scopes(parent))
            kind, service = "internal", query.delegate_to
            scopes = frozenset(query.delegate_scopes & held)
        else:
            return None
        cache_key = (parent.key, f"{kind}:{service or ''}", scopes)
        with self._lock:
            cached = self._delegated.get(cache_key)
            parsed = parse_token(cached) if cached is not None else None
            if cached is not None and parsed is not None and parsed[0] in self._tokens:
                return cached
            token = self.issue_token(
                parent.username, sorted(scopes), kind, expires=parent.expires, service=service
            )
            self._delegated[cache_key] = token
            return token

    def _login(self, endpoint: str, request: Request) -> Response:
        """``/login`` (a form taking a token, which becomes the session cookie) and
        ``/logout``; both send the browser back to ``rd``."""
        source = request.form if request.method == "POST" else request.args
        return_url = source.get("rd", "")
        if return_url and not is_local_url(return_url):
            return bad_redirect(return_url)
        if endpoint == "logout":
            return logged_out(return_url)
        if request.method == "POST":
            token = source.get("token", "").strip()
            spec, problem = self._verify(token)
            if spec is None:
                return login_form(return_url, problem, status=401)
            return logged_in(return_url, token)
        cookie = request.cookies.get(COOKIE_NAME, "")
        if cookie and self._verify(cookie)[0] is not None:
            return logged_in(return_url, cookie)
        return login_form(return_url)

    # Control ---------------------------------------------------------------------

    def _control(self, endpoint: str, request: Request) -> Response:
        """The ``/_emulator`` routes, which keep working while the API is failing."""
        body = request.get_json(silent=True)
        if endpoint == "control-requests":
            return _json_response(200, dict(self.requests))
        if not isinstance(body, dict):
            return _detail_response(400, "Body must be a JSON object", "bad_request")
        if endpoint == "control-group-mapping":
            if not all(
                isinstance(groups, list) and all(isinstance(g, str) for g in groups)
                for groups in body.values()
            ):
                return _detail_response(400, "map each scope to a list of groups", "bad_request")
            self.set_group_mapping(body)
            return _json_response(200, self.group_mapping)
        if endpoint == "control-fail":
            status = body.get("status")
            if status is not None and (not isinstance(status, int) or not 400 <= status <= 599):
                return _detail_response(400, "status must be null or 400-599", "bad_request")
            self.fail_with(status)
            return _json_response(200, {"status": status})
        username = body.get("username")
        scopes = body.get("scopes", [])
        token_type = body.get("token_type", "user")
        expires = body.get("expires")
        if not isinstance(username, str) or not username:
            return _detail_response(400, "username is required", "bad_request")
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            return _detail_response(400, "scopes must be a list of strings", "bad_request")
        if token_type not in TOKEN_TYPES:
            return _detail_response(400, f"unknown token_type {token_type!r}", "bad_request")
        if expires is not None and not isinstance(expires, int):
            return _detail_response(400, "expires must be null or epoch seconds", "bad_request")
        token = self.issue_token(username, scopes, token_type=token_type, expires=expires)
        return _json_response(201, {"token": token})


def _json_response(status: int, body: Any) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


def _detail_response(status: int, message: str, error_type: str) -> Response:
    """An error in the FastAPI-style shape Gafaelfawr uses: ``{"detail": [{msg, type}]}``."""
    return _json_response(status, {"detail": [{"msg": message, "type": error_type}]})

"""An emulator of Gafaelfawr's token and user-information API.

The service verifies every token itself against Gafaelfawr (token-info for the user and
scopes, user-info for uid, gid, groups and quota), so its tests need a Gafaelfawr that
speaks the real wire format: the same paths, JSON shapes, token syntax and 401 challenge.
Only the two read routes the service uses are emulated, plus a small ``/_emulator``
control surface so tests against a standalone stack can issue tokens and simulate an
outage the same way in-process tests do through the Python API.
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
    """A token known to the emulator; ``token`` is the full ``gt-<key>.<secret>`` string."""

    token: str
    username: str
    scopes: tuple[str, ...]
    token_type: str = "user"  # noqa: S105 (a token type, not a secret)
    created: int = 0
    expires: int | None = None

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

    def token_info(self) -> dict[str, Any]:
        """Render the token-info JSON body (never includes the secret)."""
        return {
            "token": self.key,
            "username": self.username,
            "token_type": self.token_type,
            "scopes": sorted(self.scopes),
            "created": self.created,
            "expires": self.expires,
        }


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
    """A thread-safe Gafaelfawr serving token-info and user-info over loopback HTTP.

    ``clock`` returns the current epoch time; tests pass their own to expire tokens
    without sleeping.
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
    ) -> None:
        self._lock = threading.RLock()
        self._users: dict[str, UserSpec] = {}
        self._tokens: dict[str, TokenSpec] = {}
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
        self._map = Map(
            [
                Rule(f"{API_PREFIX}/token-info", endpoint="token-info", methods=["GET"]),
                Rule(f"{API_PREFIX}/user-info", endpoint="user-info", methods=["GET"]),
                Rule("/_emulator/fail", endpoint="control-fail", methods=["PUT"]),
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
            )
            self._tokens[spec.key] = spec
            return spec.token

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
        spec, problem = self._authenticate(request)
        if spec is None:
            return self._challenge(request, problem)
        if endpoint == "token-info":
            return _json_response(200, spec.token_info())
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
        parsed = parse_token(credential.strip())
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

    def _control(self, endpoint: str, request: Request) -> Response:
        """The ``/_emulator`` routes, which keep working while the API is failing."""
        body = request.get_json(silent=True)
        if endpoint == "control-requests":
            return _json_response(200, dict(self.requests))
        if not isinstance(body, dict):
            return _detail_response(400, "Body must be a JSON object", "bad_request")
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

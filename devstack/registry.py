"""An emulator of a Docker Registry v2 (OCI distribution) server, read-only.

The service lists tags and resolves digests through the registry API the way it does
against Docker Hub or Google Artifact Registry, so the emulator speaks that protocol:
the ``/v2/`` probe, the bearer-token challenge and token endpoint, paginated tag lists
with ``Link`` headers, and manifests whose ``Docker-Content-Digest`` is the real SHA-256
of the bytes served. Images are identified by an arbitrary ``image_id`` seed: tags that
map to the same seed are aliases and share a digest, exactly as alias tags do in a real
repository.

Three authentication modes cover the registries the service meets:

* open (no ``credentials``, ``token_auth=False``): anonymous access, no tokens needed;
* anonymous tokens (no ``credentials``, ``token_auth=True``): like Docker Hub's public
  repositories, every call needs a bearer token but ``/token`` hands one to anybody;
* private (``credentials`` given): ``/token`` requires HTTP Basic auth with them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from devstack.serving import ServedEmulator, ServerThread
from devstack.tls import LocalAuthority, shared_authority

__all__ = [
    "MANIFEST_MEDIA_TYPE",
    "ImageReference",
    "RegistryEmulator",
    "build_manifest",
    "parse_reference",
]

MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_MEDIA_TYPE = "application/vnd.docker.container.image.v1+json"
LAYER_MEDIA_TYPE = "application/vnd.docker.image.rootfs.diff.tar.gzip"
TOKEN_LIFETIME = 300

_NAME_RE = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_SCOPE_RE = re.compile(r"^repository:([^:]+):([a-z,*]+)$")


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def build_manifest(image_id: str, layers: int = 3) -> bytes:
    """The schema 2 manifest bytes for an image, a pure function of ``image_id``.

    The config blob and layer digests and sizes are derived from the seed so that
    distinct images differ everywhere, the way real images do, and the same seed always
    yields the same bytes (hence the same digest) across runs and processes.
    """
    config_blob = json.dumps(
        {
            "architecture": "arm64" if image_id.endswith("arm64") else "amd64",
            "os": "linux",
            "config": {"Labels": {"org.opencontainers.image.version": image_id}},
            "rootfs": {
                "type": "layers",
                "diff_ids": [_sha256(f"{image_id}/diff/{i}".encode()) for i in range(layers)],
            },
        },
        sort_keys=True,
    ).encode()
    layer_entries = []
    for i in range(layers):
        seed = hashlib.sha256(f"{image_id}/layer/{i}".encode()).digest()
        layer_entries.append(
            {
                "mediaType": LAYER_MEDIA_TYPE,
                "size": 1_000_000 + int.from_bytes(seed[:4], "big") % 500_000_000,
                "digest": "sha256:" + seed.hex(),
            }
        )
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {
            "mediaType": CONFIG_MEDIA_TYPE,
            "size": len(config_blob),
            "digest": _sha256(config_blob),
        },
        "layers": layer_entries,
    }
    return json.dumps(manifest, indent=3).encode()


@dataclass(frozen=True)
class ImageReference:
    """A parsed image reference: ``[host/]repository[:tag][@digest]``."""

    host: str | None
    repository: str
    tag: str | None
    digest: str | None


def parse_reference(reference: str) -> ImageReference | None:
    """Split an image reference into its parts, or None when it is not one.

    The first path component is a registry host when it contains a dot or a colon or is
    ``localhost``, the same rule Docker uses; a reference with neither tag nor digest
    means the ``latest`` tag.
    """
    rest, _, digest = reference.partition("@")
    if digest and not _DIGEST_RE.match(digest):
        return None
    host: str | None = None
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        host, rest = first, remainder
    repository, colon, tag = rest.rpartition(":")
    if not colon or "/" in tag:
        repository, tag = rest, ""
    if not _NAME_RE.match(repository) or (tag and not _TAG_RE.match(tag)):
        return None
    if not tag and not digest:
        tag = "latest"
    return ImageReference(host, repository, tag or None, digest or None)


@dataclass(frozen=True)
class _IssuedToken:
    repositories: frozenset[str]
    expires: float


class RegistryEmulator(ServedEmulator):
    """A thread-safe, read-only Docker Registry v2 serving configured repositories.

    ``repositories`` maps a repository name (slashes allowed) to ``{tag: image_id}``.
    ``page_size`` is the server's maximum tag-list page, applied even when the client
    asks for no limit, so clients must follow ``Link`` headers.
    """

    _label = "registry emulator"

    def __init__(
        self,
        repositories: Mapping[str, Mapping[str, str]] | None = None,
        credentials: tuple[str, str] | None = None,
        page_size: int = 100,
        *,
        token_auth: bool | None = None,
        service: str = "devstack-registry",
        port: int = 0,
        clock: Callable[[], float] = time.time,
        authority: LocalAuthority | None = None,
    ) -> None:
        if page_size < 1:
            raise ValueError("page_size must be positive")
        self._lock = threading.RLock()
        self._repos: dict[str, dict[str, str]] = {}
        self._manifests: dict[str, tuple[bytes, str]] = {}
        self._credentials = credentials
        self._token_auth = credentials is not None if token_auth is None else token_auth
        if credentials is not None and not self._token_auth:
            raise ValueError("credentials require token authentication")
        self._page_size = page_size
        self._service = service
        self._port = port
        self._clock = clock
        self._issued: dict[str, _IssuedToken] = {}
        self._failure: int | None = None
        self._garbage: dict[str, list[str]] = {}
        self._requests: Counter[str] = Counter()
        self._server: ServerThread | None = None
        # Registries are HTTPS: served with a certificate of ``authority`` (by default the
        # process's, ``devstack.tls``), whose CA the service trusts as a private CA.
        self.authority = authority if authority is not None else shared_authority()
        self._tls = self.authority.server_context()
        for repo, tags in (repositories or {}).items():
            self.set_tags(repo, tags)
        self._map = Map(
            [
                Rule("/v2/", endpoint="v2", methods=["GET"]),
                Rule("/token", endpoint="token", methods=["GET"]),
                Rule("/v2/<path:name>/tags/list", endpoint="tags", methods=["GET"]),
                Rule(
                    "/v2/<path:name>/manifests/<reference>",
                    endpoint="manifests",
                    methods=["GET"],
                ),
                Rule("/_emulator/tags/<path:name>", endpoint="control-tags", methods=["PUT"]),
                Rule("/_emulator/fail", endpoint="control-fail", methods=["PUT"]),
                Rule("/_emulator/requests", endpoint="control-requests", methods=["GET"]),
            ],
            strict_slashes=False,
        )

    # Lifecycle -------------------------------------------------------------------

    @property
    def host(self) -> str:
        """``host:port`` as image references name this registry."""
        return self.url.split("://", 1)[1]

    @property
    def service(self) -> str:
        """The ``service`` named in challenges and expected by ``/token``."""
        return self._service

    # State -----------------------------------------------------------------------

    def set_tags(self, repo: str, tags: Mapping[str, str]) -> None:
        """Replace a repository's tags (creating it); ``tags`` maps tag to image id."""
        if not _NAME_RE.match(repo):
            raise ValueError(f"invalid repository name {repo!r}")
        for tag in tags:
            if not _TAG_RE.match(tag):
                raise ValueError(f"invalid tag {tag!r}")
        with self._lock:
            self._repos[repo] = dict(tags)
            for image_id in tags.values():
                self._remember(image_id)

    def add_tag(self, repo: str, tag: str, image_id: str) -> None:
        """Point one tag at an image, creating the repository if needed."""
        with self._lock:
            tags = dict(self._repos.get(repo, {}))
            tags[tag] = image_id
            self.set_tags(repo, tags)

    def remove_tag(self, repo: str, tag: str) -> None:
        """Delete a tag; its image stays reachable by digest through other tags only."""
        with self._lock:
            self._repos.get(repo, {}).pop(tag, None)

    def tags(self, repo: str) -> list[str]:
        """The repository's tags in the order the API lists them."""
        with self._lock:
            return sorted(self._repos[repo])

    def digest(self, repo: str, tag: str) -> str:
        """The manifest digest a tag resolves to; KeyError if unknown."""
        with self._lock:
            return self._remember(self._repos[repo][tag])[1]

    def digest_for_reference(self, ref: str) -> str | None:
        """The digest of a full image reference if this registry knows it, else None.

        A reference naming another registry host is unknown here; one with no host is
        looked up in this registry's repositories.
        """
        parsed = parse_reference(ref)
        if parsed is None:
            return None
        if parsed.host is not None and self._server is not None and not self._is_me(parsed.host):
            return None
        with self._lock:
            found = self._resolve(parsed.repository, parsed.digest or parsed.tag or "")
        return found[1] if found is not None else None

    def _is_me(self, host: str) -> bool:
        """Whether ``host`` names this registry; ``localhost`` and ``127.0.0.1`` are one."""
        name, _, port = host.rpartition(":")
        return name in ("127.0.0.1", "localhost") and port == str(self._server_port())

    def _server_port(self) -> int:
        if self._server is None:
            raise RuntimeError("registry emulator not started")
        return self._server.port

    def list_garbage_tags(self, repo: str, tags: list[str]) -> None:
        """Misbehave: append these strings (no valid tag needed) to ``repo``'s tag list, as a
        broken or hostile registry might; an empty list behaves again."""
        with self._lock:
            self._garbage[repo] = list(tags)

    def fail_with(self, status: int | None) -> None:
        """Answer every ``/v2`` and ``/token`` call with ``status``; None restores service."""
        if status is not None and not 400 <= status <= 599:
            raise ValueError("failure status must be an HTTP error status")
        with self._lock:
            self._failure = status

    @property
    def requests(self) -> Counter[str]:
        """A snapshot of calls per route: ``v2``, ``token``, ``tags``, ``manifests``.

        ``manifests.head`` and ``manifests.get`` split the manifest calls by method.
        """
        with self._lock:
            return Counter(self._requests)

    def reset_requests(self) -> None:
        """Zero the per-route counters."""
        with self._lock:
            self._requests.clear()

    def _remember(self, image_id: str) -> tuple[bytes, str]:
        """Build (once) and cache an image's manifest bytes and digest (lock held)."""
        entry = self._manifests.get(image_id)
        if entry is None:
            manifest = build_manifest(image_id)
            entry = (manifest, _sha256(manifest))
            self._manifests[image_id] = entry
        return entry

    def _resolve(self, repo: str, reference: str) -> tuple[bytes, str] | None:
        """Manifest bytes and digest for a tag or digest in a repository (lock held)."""
        tags = self._repos.get(repo)
        if tags is None:
            return None
        if _DIGEST_RE.match(reference):
            for image_id in set(tags.values()):
                entry = self._remember(image_id)
                if entry[1] == reference:
                    return entry
            return None
        tagged = tags.get(reference)
        return self._remember(tagged) if tagged is not None else None

    # HTTP ------------------------------------------------------------------------

    def wsgi_app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """The WSGI entry point; usable on its own under any WSGI server."""
        request = Request(environ)
        response = self._dispatch(request)
        response.headers["Docker-Distribution-API-Version"] = "registry/2.0"
        return response(environ, start_response)

    def _dispatch(self, request: Request) -> Response:
        adapter = self._map.bind_to_environ(request.environ)
        try:
            endpoint, args = adapter.match()
        except NotFound:
            return _errors(404, "NOT_FOUND", "no such route")
        except MethodNotAllowed as exc:
            response = _errors(405, "UNSUPPORTED", "method not allowed")
            response.headers["Allow"] = ", ".join(exc.valid_methods or [])
            return response
        except HTTPException as exc:
            return _errors(exc.code or 500, "UNSUPPORTED", exc.name)
        if endpoint.startswith("control-"):
            return self._control(endpoint, request, args)
        with self._lock:
            self._requests[endpoint] += 1
            if endpoint == "manifests":
                self._requests[f"manifests.{request.method.lower()}"] += 1
            failure = self._failure
        if failure is not None:
            return _errors(failure, "UNAVAILABLE", "emulated registry failure")
        if endpoint == "token":
            return self._token(request)
        if endpoint == "v2":
            if self._token_auth and self._bearer(request) is None:
                return self._challenge(request, None)
            return _json(200, {})
        name = args["name"]
        if not _NAME_RE.match(name):
            return _errors(400, "NAME_INVALID", "invalid repository name", {"name": name})
        if self._token_auth:
            grant = self._bearer(request)
            if grant is None or name not in grant.repositories:
                return self._challenge(request, name, insufficient=grant is not None)
        if endpoint == "tags":
            return self._tags(request, name)
        return self._manifest(name, args["reference"])

    def _tags(self, request: Request, name: str) -> Response:
        with self._lock:
            if name not in self._repos:
                return _errors(
                    404, "NAME_UNKNOWN", "repository name not known to registry", {"name": name}
                )
            all_tags = sorted(self._repos[name])
        raw_n = request.args.get("n")
        page = self._page_size
        if raw_n is not None:
            try:
                requested = int(raw_n)
            except ValueError:
                requested = -1
            if requested < 0:
                return _errors(
                    400,
                    "PAGINATION_NUMBER_INVALID",
                    "invalid number of results requested",
                    {"n": raw_n},
                )
            page = min(requested, self._page_size)
        last = request.args.get("last")
        remaining = [t for t in all_tags if last is None or t > last]
        chunk = remaining[:page]
        if len(remaining) <= page:
            with self._lock:
                chunk = chunk + self._garbage.get(name, [])
        response = _json(200, {"name": name, "tags": chunk})
        if chunk and len(remaining) > len(chunk):
            link = f"/v2/{name}/tags/list?n={page}&last={quote(chunk[-1], safe='')}"
            response.headers["Link"] = f'<{link}>; rel="next"'
        return response

    def _manifest(self, name: str, reference: str) -> Response:
        with self._lock:
            if name not in self._repos:
                return _errors(
                    404, "NAME_UNKNOWN", "repository name not known to registry", {"name": name}
                )
            found = self._resolve(name, reference)
        if found is None:
            detail = {"Digest" if _DIGEST_RE.match(reference) else "Tag": reference}
            return _errors(404, "MANIFEST_UNKNOWN", "manifest unknown", detail)
        manifest, digest = found
        response = Response(manifest, status=200, content_type=MANIFEST_MEDIA_TYPE)
        response.headers["Docker-Content-Digest"] = digest
        response.headers["ETag"] = f'"{digest}"'
        response.headers["Content-Length"] = str(len(manifest))
        return response

    # Authentication --------------------------------------------------------------

    def _token(self, request: Request) -> Response:
        """The token server: grant pull on the requested repositories."""
        if self._credentials is not None:
            supplied = _basic_credentials(request)
            if supplied != self._credentials:
                response = _errors(401, "UNAUTHORIZED", "incorrect username or password")
                response.headers["WWW-Authenticate"] = f'Basic realm="{self._service}"'
                return response
        service = request.args.get("service")
        if service is not None and service != self._service:
            return _errors(400, "DENIED", f"unknown service {service!r}")
        repositories: set[str] = set()
        for scope in request.args.getlist("scope"):
            for part in scope.split():
                match = _SCOPE_RE.match(part)
                if match is None:
                    return _errors(400, "DENIED", f"invalid scope {part!r}")
                if "pull" in match.group(2).split(",") or match.group(2) == "*":
                    repositories.add(match.group(1))
        token = secrets.token_urlsafe(32)
        now = self._clock()
        with self._lock:
            self._issued = {k: v for k, v in self._issued.items() if v.expires > now}
            self._issued[token] = _IssuedToken(frozenset(repositories), now + TOKEN_LIFETIME)
        issued_at = datetime.fromtimestamp(now, tz=UTC).isoformat().replace("+00:00", "Z")
        return _json(
            200,
            {
                "token": token,
                "access_token": token,
                "expires_in": TOKEN_LIFETIME,
                "issued_at": issued_at,
            },
        )

    def _bearer(self, request: Request) -> _IssuedToken | None:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        with self._lock:
            grant = self._issued.get(token.strip())
        if grant is None or grant.expires <= self._clock():
            return None
        return grant

    def _challenge(
        self, request: Request, name: str | None, insufficient: bool = False
    ) -> Response:
        realm = request.host_url.rstrip("/") + "/token"
        challenge = f'Bearer realm="{realm}",service="{self._service}"'
        detail: Any = None
        if name is not None:
            challenge += f',scope="repository:{name}:pull"'
            detail = [{"Type": "repository", "Name": name, "Action": "pull"}]
        if insufficient:
            challenge += ',error="insufficient_scope"'
        response = _errors(401, "UNAUTHORIZED", "authentication required", detail)
        response.headers["WWW-Authenticate"] = challenge
        return response

    # Control ---------------------------------------------------------------------

    def _control(self, endpoint: str, request: Request, args: Mapping[str, str]) -> Response:
        """The ``/_emulator`` routes; they keep working while the registry is failing."""
        if endpoint == "control-requests":
            return _json(200, dict(self.requests))
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            return _errors(400, "BAD_REQUEST", "body must be a JSON object")
        if endpoint == "control-fail":
            status = body.get("status")
            if status is not None and (not isinstance(status, int) or not 400 <= status <= 599):
                return _errors(400, "BAD_REQUEST", "status must be null or 400-599")
            self.fail_with(status)
            return _json(200, {"status": status})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in body.items()):
            return _errors(400, "BAD_REQUEST", "body must map tags to image ids")
        try:
            self.set_tags(args["name"], body)
        except ValueError as exc:
            return _errors(400, "BAD_REQUEST", str(exc))
        return _json(200, {"name": args["name"], "tags": self.tags(args["name"])})


def _basic_credentials(request: Request) -> tuple[str, str] | None:
    header = request.headers.get("Authorization", "")
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon else None


def _json(status: int, body: Any) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


def _errors(status: int, code: str, message: str, detail: Any = None) -> Response:
    """An error in the distribution spec's ``{"errors": [{code, message, detail}]}`` shape."""
    error: dict[str, Any] = {"code": code, "message": message}
    if detail is not None:
        error["detail"] = detail
    return _json(status, {"errors": [error]})

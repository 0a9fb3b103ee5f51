"""A Docker Registry v2 (OCI distribution) client: which lab tags exist, and their digests.

The spawner asks Docker Hub, Google Artifact Registry or any other v2 registry for a
repository's tags and resolves tags to manifest digests. One :class:`RegistryClient` is
shared by every greenlet of a worker, so it keeps a pooled session and a lock-protected
token cache, and never mutates shared session state per request.

Authentication follows the registry's lead: a request goes out anonymously until the
registry answers 401 with a ``WWW-Authenticate`` challenge. For ``Bearer`` the client fetches
a token for ``repository:<name>:pull`` from the challenge's realm (with Basic credentials
when it has them), caches it per scope until shortly before it expires and, having learnt
the realm, sends cached tokens up front on later calls so each needs one round trip. For
``Basic`` it sends its credentials. Credentials and tokens never appear in logs or errors.

Transient trouble (connection errors, timeouts, 429, 5xx) is retried with exponential
backoff and jitter, honouring ``Retry-After`` up to a cap. A 404 raises
:class:`RegistryNotFound`; everything else that goes wrong raises :class:`RegistryError`,
which routes turn into a 503 like any other unavailable dependency.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict

from app.errors import DependencyUnavailableError, InvalidRequestError, NotFoundError

__all__ = [
    "MANIFEST_MEDIA_TYPES",
    "RegistryClient",
    "RegistryError",
    "RegistryNotFound",
    "is_valid_tag",
]

logger = logging.getLogger(__name__)

MANIFEST_MEDIA_TYPES = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
)
"""Manifest types we accept; without them registries may convert or refuse to answer."""

TAG_PAGE_SIZE = 1000
"""Tags asked for per page; servers may return fewer and we follow ``Link`` regardless."""

DEFAULT_TOKEN_LIFETIME = 60
"""Seconds a token lives when the token server does not say (the distribution spec's rule)."""

MAX_BODY_BYTES = 16 * 1024 * 1024
"""Largest response body read; a bigger one is a misbehaving server, not a tag list."""

MAX_TAG_PAGES = 10_000
"""Pages followed before concluding the server's ``Link`` headers loop."""

_USER_AGENT = "lab-spawner registry client"
_TRANSIENT = (
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.ChunkedEncodingError,
)
"""Failures worth another attempt: the network, not the request, was at fault."""
_NAME_RE = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST_RE = re.compile(r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")
# One element of a WWW-Authenticate header: either ``key=value`` (value quoted or bare) or
# an auth scheme name, which starts a new challenge.
_CHALLENGE_PART_RE = re.compile(
    r"""[\s,]*(?:
        (?P<key>[!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=\s*
            (?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s,]*))
      | (?P<scheme>[!#$%&'*+.^_`|~0-9A-Za-z-]+)
    )""",
    re.VERBOSE,
)


def is_valid_tag(tag: str) -> bool:
    """Whether ``tag`` is a tag Docker accepts (what a registry should only ever return)."""
    return _TAG_RE.fullmatch(tag) is not None


class RegistryError(DependencyUnavailableError):
    """The registry could not be reached, refused us, or answered nonsense.

    A subclass of :class:`DependencyUnavailableError` so routes answer 503: the image may
    well exist, we just cannot tell right now.
    """


class RegistryNotFound(NotFoundError):
    """The registry says the repository, tag or digest does not exist (HTTP 404).

    Distinct from :class:`RegistryError` because it is a definite answer, not an outage:
    callers may report an unknown image to the user rather than retry later.
    """

    def __init__(self, message: str, *, repository: str, reference: str | None = None) -> None:
        super().__init__(message)
        self.repository = repository
        self.reference = reference


@dataclass(frozen=True)
class _Challenge:
    """One parsed ``WWW-Authenticate`` challenge: a scheme and its parameters."""

    scheme: str
    params: Mapping[str, str]


@dataclass(frozen=True)
class _Reply:
    """A fully read response; the connection is back in the pool by the time we have it."""

    status: int
    headers: CaseInsensitiveDict[str]
    body: bytes
    url: str
    links: Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class _CachedToken:
    value: str
    refresh_at: float


def _parse_challenges(header: str) -> list[_Challenge]:
    """Split a ``WWW-Authenticate`` header into its challenges.

    A header may carry several challenges (``Bearer realm=..., Basic realm=...``), and
    quoted values contain commas (``scope="repository:a:pull,push"``), so a plain split on
    commas is not enough.
    """
    challenges: list[tuple[str, dict[str, str]]] = []
    position = 0
    while position < len(header):
        match = _CHALLENGE_PART_RE.match(header, position)
        if match is None or match.end() == position:
            break
        position = match.end()
        if match.group("scheme"):
            challenges.append((match.group("scheme").lower(), {}))
        elif challenges:
            quoted = match.group("quoted")
            value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else match.group("bare")
            challenges[-1][1][match.group("key").lower()] = value
    return [_Challenge(scheme, params) for scheme, params in challenges]


def _origin(url: str) -> tuple[str, str]:
    """Scheme and ``host[:port]`` of a URL, the unit credentials may be sent to."""
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


def _basic_header(credentials: tuple[str, str]) -> str:
    encoded = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
    return f"Basic {encoded}"


class RegistryClient:
    """Lists tags and resolves digests in one Docker Registry v2 server.

    ``retries`` is the number of further attempts after the first for transient failures,
    so a call makes at most ``retries + 1`` attempts per request. ``backoff`` is the first
    delay between attempts, doubled for each further attempt, jittered, and capped (as is
    any ``Retry-After``) at ``max_backoff``. ``clock`` and ``sleep`` exist so tests can
    control token expiry and observe delays without waiting.
    """

    def __init__(
        self,
        base_url: str,
        *,
        credentials: tuple[str, str] | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        session: requests.Session | None = None,
        backoff: float = 0.5,
        max_backoff: float = 10.0,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("registry base URL must be an http or https URL with a host")
        if parts.username is not None or parts.password is not None:
            # Credentials in the URL would end up in every log line and error message.
            raise ValueError("pass registry credentials through credentials=, not the URL")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if retries < 0:
            raise ValueError("retries must not be negative")
        self._base = base_url.rstrip("/")
        self._display = f"{parts.scheme}://{parts.netloc}"
        self._origin = _origin(self._base)
        self._credentials = credentials
        self._timeout = timeout
        self._retries = retries
        self._backoff = max(0.0, backoff)
        self._max_backoff = max(0.0, max_backoff)
        self._clock = clock or time.monotonic
        self._sleep = sleep
        self._owns_session = session is None
        if session is None:
            session = requests.Session()
            # Retries are ours (with backoff and logging); urllib3 must not add its own.
            adapter = HTTPAdapter(pool_connections=4, pool_maxsize=32, max_retries=0)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
        self._session = session
        self._lock = threading.Lock()
        self._tokens: dict[tuple[str, str, str], _CachedToken] = {}
        self._fetch_locks: dict[tuple[str, str, str], threading.Lock] = {}
        # What the registry asked for last time, so later calls authenticate up front.
        self._bearer: _Challenge | None = None
        self._basic = False

    @property
    def base_url(self) -> str:
        """The registry's base URL, without a trailing slash."""
        return self._base

    def close(self) -> None:
        """Release pooled connections if the session is ours."""
        if self._owns_session:
            self._session.close()

    # Public API ------------------------------------------------------------------

    def list_tags(self, repository: str) -> list[str]:
        """Every tag of ``repository``, following ``Link`` pagination to the end.

        Tags come back in the registry's order with duplicates dropped, since a server
        whose tag set changes between pages may repeat one.
        """
        self._check_repository(repository)
        url: str | None = f"{self._base}/v2/{repository}/tags/list?n={TAG_PAGE_SIZE}"
        tags: list[str] = []
        seen_tags: set[str] = set()
        seen_urls: set[str] = set()
        while url is not None:
            if url in seen_urls or len(seen_urls) >= MAX_TAG_PAGES:
                raise RegistryError(self._message(repository, "tag list pagination loops"))
            seen_urls.add(url)
            reply = self._request("GET", url, repository, {"Accept": "application/json"})
            self._raise_for_status(reply, repository, None)
            for tag in self._page_tags(reply, repository):
                if tag not in seen_tags:
                    seen_tags.add(tag)
                    tags.append(tag)
            url = self._next_page(reply, repository)
        return tags

    def digest(self, repository: str, reference: str) -> str:
        """The manifest digest a tag (or digest) resolves to, as ``algorithm:hex``.

        A HEAD with every manifest type in ``Accept`` gets the digest the registry stores
        without downloading the manifest, and a multi-arch image yields its index digest
        rather than one platform's. Servers that omit ``Docker-Content-Digest`` get a GET,
        and the digest is the SHA-256 of the exact bytes served.
        """
        self._check_repository(repository)
        if not (_TAG_RE.fullmatch(reference) or _DIGEST_RE.fullmatch(reference)):
            raise InvalidRequestError(f"invalid image tag or digest {reference!r}")
        url = f"{self._base}/v2/{repository}/manifests/{reference}"
        headers = {"Accept": ", ".join(MANIFEST_MEDIA_TYPES)}
        reply = self._request("HEAD", url, repository, headers)
        if reply.status != 405:
            self._raise_for_status(reply, repository, reference)
            header = reply.headers.get("Docker-Content-Digest", "").strip()
            if _DIGEST_RE.match(header):
                return header
        reply = self._request("GET", url, repository, headers)
        self._raise_for_status(reply, repository, reference)
        return "sha256:" + hashlib.sha256(reply.body).hexdigest()

    # Requests and authentication -----------------------------------------------

    def _request(
        self, method: str, url: str, repository: str, headers: Mapping[str, str]
    ) -> _Reply:
        """One registry call, authenticating as the registry demands.

        Sends whatever authentication the registry asked for before; on a 401 it answers
        the challenge and tries exactly once more, so a registry that keeps refusing costs
        two round trips, not a loop.
        """
        scope = f"repository:{repository}:pull"
        sent_headers = dict(headers)
        sent_token = self._preemptive_auth(repository, scope, sent_headers)
        reply = self._send(method, url, repository, headers=sent_headers)
        if reply.status != 401:
            return reply
        challenges = {
            c.scheme: c for c in _parse_challenges(reply.headers.get("WWW-Authenticate", ""))
        }
        retry_headers = dict(headers)
        bearer = challenges.get("bearer")
        if bearer is not None and bearer.params.get("realm"):
            with self._lock:
                self._bearer = bearer
                if sent_token is not None:
                    # The registry refused a token we thought valid; do not offer it again.
                    self._forget_token(bearer, scope, sent_token)
            token = self._token(repository, bearer, scope)
            retry_headers["Authorization"] = f"Bearer {token}"
        elif "basic" in challenges:
            if self._credentials is None:
                raise RegistryError(self._message(repository, "registry requires credentials"))
            if "Authorization" in sent_headers and sent_token is None:
                raise RegistryError(self._message(repository, "registry refused the credentials"))
            with self._lock:
                self._basic = True
            retry_headers["Authorization"] = _basic_header(self._credentials)
        else:
            raise RegistryError(
                self._message(repository, "authentication required, no usable challenge")
            )
        reply = self._send(method, url, repository, headers=retry_headers)
        if reply.status == 401:
            raise RegistryError(self._message(repository, "registry refused our authentication"))
        return reply

    def _preemptive_auth(self, repository: str, scope: str, headers: dict[str, str]) -> str | None:
        """Add the ``Authorization`` the registry wanted last time; return a token sent.

        Saves a 401 round trip on every call after the first, and lets one token serve
        every call for its scope until it nears expiry.
        """
        with self._lock:
            bearer = self._bearer
            basic = self._basic
        if bearer is not None:
            token = self._token(repository, bearer, scope)
            headers["Authorization"] = f"Bearer {token}"
            return token
        if basic and self._credentials is not None:
            headers["Authorization"] = _basic_header(self._credentials)
        return None

    def _token_key(self, challenge: _Challenge, scope: str) -> tuple[str, str, str]:
        return (challenge.params.get("realm", ""), challenge.params.get("service", ""), scope)

    def _forget_token(self, challenge: _Challenge, scope: str, token: str) -> None:
        """Drop a cached token the registry refused (lock held)."""
        key = self._token_key(challenge, scope)
        cached = self._tokens.get(key)
        if cached is not None and cached.value == token:
            del self._tokens[key]

    def _token(self, repository: str, challenge: _Challenge, scope: str) -> str:
        """A bearer token for ``scope`` from the cache or the challenge's realm.

        Concurrent callers needing the same scope wait on one fetch instead of each
        asking the token server, which matters when many greenlets start together.
        """
        key = self._token_key(challenge, scope)
        with self._lock:
            cached = self._tokens.get(key)
            if cached is not None and cached.refresh_at > self._clock():
                return cached.value
            fetch_lock = self._fetch_locks.setdefault(key, threading.Lock())
        with fetch_lock:
            with self._lock:
                cached = self._tokens.get(key)
                if cached is not None and cached.refresh_at > self._clock():
                    return cached.value
            value, lifetime = self._fetch_token(repository, challenge, scope)
            # Refresh a little before expiry so a token never lapses in flight.
            refresh_at = self._clock() + lifetime - min(30.0, lifetime / 4)
            with self._lock:
                self._tokens[key] = _CachedToken(value, refresh_at)
            return value

    def _fetch_token(self, repository: str, challenge: _Challenge, scope: str) -> tuple[str, float]:
        """Ask the token server for a pull token; returns it and its lifetime in seconds."""
        realm = challenge.params["realm"]
        realm_scheme, realm_host = _origin(realm)
        if realm_scheme not in ("http", "https") or not realm_host:
            raise RegistryError(self._message(repository, "registry named an invalid token realm"))
        if realm_scheme == "http" and self._origin[0] == "https":
            # Never downgrade: credentials or tokens must not cross the network in clear.
            raise RegistryError(self._message(repository, "registry named an insecure token realm"))
        params = {"scope": scope}
        if challenge.params.get("service"):
            params["service"] = challenge.params["service"]
        headers = {"Accept": "application/json"}
        if self._credentials is not None:
            headers["Authorization"] = _basic_header(self._credentials)
        reply = self._send("GET", realm, repository, headers=headers, params=params)
        if reply.status in (401, 403):
            problem = (
                "token service requires credentials"
                if self._credentials is None
                else "token service refused the credentials"
            )
            raise RegistryError(self._message(repository, problem))
        if reply.status != 200:
            raise RegistryError(
                self._message(repository, f"token service answered HTTP {reply.status}")
            )
        body = self._json(reply, repository)
        token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise RegistryError(self._message(repository, "token service returned no token"))
        lifetime: float = DEFAULT_TOKEN_LIFETIME
        expires_in = body.get("expires_in")
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
            lifetime = max(0.0, float(expires_in))
        return token, lifetime

    def _send(
        self,
        method: str,
        url: str,
        repository: str,
        *,
        headers: Mapping[str, str],
        params: Mapping[str, str] | None = None,
    ) -> _Reply:
        """Send with timeouts, retrying transient failures with backoff; read the body.

        The body is read here, inside the retry loop, so a connection dropped mid-body
        is retried like one dropped before the headers.
        """
        attempts = self._retries + 1
        failure = ""
        for attempt in range(attempts):
            retry_after: str | None = None
            try:
                reply = self._attempt(method, url, repository, headers, params)
            except _TRANSIENT as exc:
                failure = type(exc).__name__
            else:
                if reply.status != 429 and reply.status < 500:
                    return reply
                failure = f"HTTP {reply.status}"
                retry_after = reply.headers.get("Retry-After")
            if attempt + 1 == attempts:
                break
            delay = self._delay(attempt, retry_after)
            logger.warning(
                "Registry %s (repository %s) failed: %s; attempt %d of %d, retrying in %.2fs",
                self._display,
                repository,
                failure,
                attempt + 1,
                attempts,
                delay,
            )
            (self._sleep or time.sleep)(delay)
        raise RegistryError(
            self._message(repository, f"unavailable after {attempts} attempts ({failure})")
        )

    def _attempt(
        self,
        method: str,
        url: str,
        repository: str,
        headers: Mapping[str, str],
        params: Mapping[str, str] | None,
    ) -> _Reply:
        """One HTTP exchange, its body read in full up to :data:`MAX_BODY_BYTES`.

        Connection trouble propagates for :meth:`_send` to retry; any other ``requests``
        failure (a bad redirect, undecodable content) is permanent and becomes a
        :class:`RegistryError` here.
        """
        try:
            response = self._session.request(
                method,
                url,
                headers={"User-Agent": _USER_AGENT, **headers},
                params=params,
                timeout=(self._timeout, self._timeout),
                allow_redirects=True,
                stream=True,
            )
            with response:
                chunks: list[bytes] = []
                size = 0
                if method != "HEAD":
                    for chunk in response.iter_content(chunk_size=65536):
                        size += len(chunk)
                        if size > MAX_BODY_BYTES:
                            raise RegistryError(self._message(repository, "response too large"))
                        chunks.append(chunk)
                return _Reply(
                    status=response.status_code,
                    headers=response.headers,
                    body=b"".join(chunks),
                    url=response.url,
                    links=response.links,
                )
        except _TRANSIENT:
            raise
        except requests.RequestException as exc:
            raise RegistryError(
                self._message(repository, f"request failed ({type(exc).__name__})")
            ) from None

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before attempt ``attempt + 2``.

        A server's ``Retry-After`` wins (it knows its own load) but is capped, so a
        request thread is never parked for minutes. Otherwise exponential backoff with
        jitter over its upper half, so workers that failed together do not retry together.
        """
        requested = _parse_retry_after(retry_after) if retry_after else None
        if requested is not None:
            return min(requested, self._max_backoff)
        ceiling = min(self._backoff * (2**attempt), self._max_backoff)
        return ceiling / 2 + random.uniform(0, ceiling / 2)  # noqa: S311 (jitter, not crypto)

    # Response handling -----------------------------------------------------------

    def _raise_for_status(self, reply: _Reply, repository: str, reference: str | None) -> None:
        """Turn a non-2xx reply into :class:`RegistryNotFound` or :class:`RegistryError`."""
        if 200 <= reply.status < 300:
            return
        if reply.status == 404:
            if reference is None:
                what = f"repository {repository}"
            elif _DIGEST_RE.match(reference):
                what = f"image {repository}@{reference}"
            else:
                what = f"image {repository}:{reference}"
            raise RegistryNotFound(
                f"{what} not found in registry {self._display}",
                repository=repository,
                reference=reference,
            )
        if reply.status == 403:
            raise RegistryError(self._message(repository, "access denied (HTTP 403)"))
        raise RegistryError(self._message(repository, f"unexpected HTTP {reply.status}"))

    def _page_tags(self, reply: _Reply, repository: str) -> list[str]:
        body = self._json(reply, repository)
        tags = body.get("tags") if isinstance(body, dict) else None
        if tags is None and isinstance(body, dict) and "tags" in body:
            return []  # the distribution registry says null for a repository with no tags
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise RegistryError(self._message(repository, "malformed tag list"))
        return tags

    def _next_page(self, reply: _Reply, repository: str) -> str | None:
        """The absolute URL of the next tag page, or None at the end."""
        link = reply.links.get("next", {}).get("url")
        if not link:
            return None
        url = urljoin(reply.url, link)
        if _origin(url) != self._origin:
            raise RegistryError(self._message(repository, "tag list links to another host"))
        return url

    def _json(self, reply: _Reply, repository: str) -> Any:
        try:
            return json.loads(reply.body)
        except ValueError:
            raise RegistryError(self._message(repository, "malformed JSON response")) from None

    def _check_repository(self, repository: str) -> None:
        """Refuse names that cannot exist, before they are spliced into a URL path."""
        if not _NAME_RE.match(repository):
            raise InvalidRequestError(f"invalid image repository name {repository!r}")

    def _message(self, repository: str, problem: str) -> str:
        return f"registry {self._display}, repository {repository}: {problem}"


def _parse_retry_after(value: str) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP date), or None."""
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())

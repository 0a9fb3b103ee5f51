"""The auth subrequest ingress-nginx makes before proxying to an Ingress with an ``auth-url``.

As NGINX's ``auth_request`` does for such an Ingress: a request (``auth-method``, GET by
default, no body) goes to the ``auth-url`` with the client request's own headers (its
``Authorization`` and ``Cookie`` among them) and what NGINX adds: ``X-Original-URL`` (the full
URL), ``X-Original-URI``, ``X-Original-Method``, ``X-Auth-Request-Redirect``, ``X-Sent-From``,
``X-Real-IP``, ``X-Forwarded-For`` and ``X-Request-ID``. Then:

- a 2xx lets the request through, and each header named in ``auth-response-headers`` is set on
  the proxied request from the answer, or removed when the answer lacks it (so a client cannot
  supply ``X-Auth-Request-User`` itself, and Gafaelfawr's token-free ``Authorization`` and
  ``Cookie`` replace the client's);
- a 401 goes back to the client with the answer's ``WWW-Authenticate``, unless ``auth-signin``
  is set: then the client is redirected there with ``rd`` naming the URL it asked for;
- a 403 goes back with its challenge; when the answer carries ``X-Error-Status`` and
  ``X-Error-Body`` (Gafaelfawr's way through ``auth_request``, which knows only 401 and 403), the
  client gets that status and body, as the error page Gafaelfawr's configuration snippet names
  gives them;
- anything else, or no answer, is a 500.

Not emulated: ``auth-cache-*`` (every request asks), ``auth-snippet`` and friends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

import urllib3
from werkzeug.wrappers import Request

NGINX = "nginx.ingress.kubernetes.io/"
AUTH_URL = NGINX + "auth-url"
AUTH_METHOD = NGINX + "auth-method"
AUTH_RESPONSE_HEADERS = NGINX + "auth-response-headers"
AUTH_SIGNIN = NGINX + "auth-signin"

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers that describe one connection and are never passed on."""


@dataclass(frozen=True)
class Passed:
    """The request may go on, with these headers set (a value) or removed (None)."""

    lifted: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Refused:
    """What the client gets instead of the backend's answer."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class OriginalRequest:
    """What NGINX tells the auth service about the request it is deciding on."""

    url: str
    uri: str
    method: str
    client: str
    request_id: str


def end_to_end(request: Request) -> list[tuple[str, str]]:
    """The request's headers without the hop-by-hop ones (and those ``Connection`` names)."""
    named = {n.strip().lower() for n in request.headers.get("Connection", "").split(",")}
    return [
        (name, value)
        for name, value in request.headers.items()
        if name.lower() not in HOP_BY_HOP and name.lower() not in named
    ]


class AuthSubrequests:
    """Asks an Ingress's auth service about requests, over pooled connections."""

    def __init__(self, timeout: float = 10.0) -> None:
        self._pool = urllib3.PoolManager(maxsize=8, block=False)
        self._timeout = timeout

    def close(self) -> None:
        self._pool.clear()

    def check(
        self, annotations: dict[str, str], request: Request, original: OriginalRequest
    ) -> Passed | Refused:
        """Ask the auth service, if the Ingress names one; else let the request pass."""
        auth_url = annotations.get(AUTH_URL)
        if not auth_url:
            return Passed()
        headers = [
            (n, v)
            for n, v in end_to_end(request)
            if n.lower() not in ("host", "content-length", "content-type")
        ]
        headers += [
            ("X-Original-URL", original.url),
            ("X-Original-URI", original.uri),
            ("X-Original-Method", original.method),
            ("X-Auth-Request-Redirect", original.uri),
            ("X-Sent-From", "nginx-ingress-controller"),
            ("X-Real-IP", original.client),
            ("X-Forwarded-For", original.client),
            ("X-Request-ID", original.request_id),
        ]
        method = annotations.get(AUTH_METHOD) or "GET"
        try:
            answer = self._pool.request(
                method,
                auth_url,
                headers=urllib3.HTTPHeaderDict(headers),
                retries=False,
                redirect=False,
                timeout=self._timeout,
            )
        except urllib3.exceptions.HTTPError:
            return _plain(500, "the auth service did not answer")
        if 200 <= answer.status < 300:
            names = [
                n.strip()
                for n in annotations.get(AUTH_RESPONSE_HEADERS, "").split(",")
                if n.strip()
            ]
            return Passed({name: _joined(name, answer.headers.getlist(name)) for name in names})
        challenge = answer.headers.get("WWW-Authenticate")
        if answer.status == 401:
            signin = annotations.get(AUTH_SIGNIN)
            if signin:
                separator = "&" if "?" in signin else "?"
                location = f"{signin}{separator}rd={quote(original.url, safe='')}"
                return Refused(302, [("Location", location)], b"")
            return _plain(401, "401 Unauthorized", challenge)
        if answer.status == 403:
            status, body = answer.headers.get("X-Error-Status"), answer.headers.get("X-Error-Body")
            if status and status.isdigit() and body:
                extra = [("WWW-Authenticate", challenge)] if challenge else []
                return Refused(int(status), extra, body.encode(), "application/json")
            return _plain(403, "403 Forbidden", challenge)
        return _plain(500, f"the auth service answered {answer.status}")


def _joined(name: str, values: list[str]) -> str | None:
    """One header from the answer's values (several ``Cookie`` headers make one)."""
    if not values:
        return None
    return ("; " if name.lower() == "cookie" else ", ").join(values)


def _plain(status: int, text: str, challenge: str | None = None) -> Refused:
    headers = [("WWW-Authenticate", challenge)] if challenge else []
    return Refused(status, headers, (text + "\n").encode())

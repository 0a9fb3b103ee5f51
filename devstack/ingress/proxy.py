"""The local stack's ingress controller: a reverse proxy on loopback over the emulator's Ingresses.

It plays ingress-nginx for the Ingresses in the Kubernetes emulator's store, read at every
request (so a new or changed Ingress applies at once): the request's host and path choose a
route (``routes``), the Ingress's auth service is asked first when it has one (``auth``), and
the request then goes to the route's Service at its loopback ClusterIP (``backends``), whose
listener forwards it to a ready pod. The answer streams back as it comes: status, headers
(without hop-by-hop ones, and without the backend's ``Date`` and ``Server``, which the proxy
sets as NGINX does) and body, sized or chunked. Request bodies stream to the backend too, a
block at a time, so a large upload (a file PUT over WebDAV, say) is never held whole; any method
passes (WebDAV's PROPFIND, MKCOL, COPY, MOVE and the rest), and headers such as WebDAV's
``Destination`` and the client's ``Host`` reach the backend as the client sent them.

Answers of its own: 404 when no Ingress path matches, 503 when the Service has nowhere to send
the request, 502 when the backend cannot be reached or breaks off, 504 when it does not answer
in time. The client's own ``X-Auth-Request-*`` headers never reach a backend. Besides the
request's headers the backend gets ``X-Request-ID``, ``X-Real-IP``, ``X-Forwarded-For``,
``X-Forwarded-Host``, ``X-Forwarded-Port``, ``X-Forwarded-Proto`` and ``X-Original-URI``, as
ingress-nginx sets them. WebSocket upgrades are not proxied.
"""

from __future__ import annotations

import http.client
import logging
import secrets
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import quote, urlsplit

from werkzeug.wrappers import Request, Response

from devstack.serving import ServedEmulator, ServerThread

from .auth import HOP_BY_HOP, AuthSubrequests, OriginalRequest, Refused, end_to_end
from .backends import NoBackend, ObjectReader, backend_address
from .routes import choose

_log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
_NOT_FROM_BACKEND = frozenset({"date", "server"})
_FORWARDING = (
    "x-request-id",
    "x-real-ip",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-port",
    "x-forwarded-proto",
    "x-original-uri",
)


class IngressProxy(ServedEmulator):
    """ingress-nginx for the emulator's Ingresses, served on a loopback port.

    ``store`` is the Kubernetes emulator's store (read, never written); ``upstream_timeout``
    is how long a backend may take to connect or between two reads of its answer (NGINX's
    ``proxy_read_timeout``, 60 seconds).
    """

    _label = "ingress proxy"

    def __init__(
        self,
        store: ObjectReader,
        *,
        port: int = 0,
        auth_timeout: float = 10.0,
        upstream_timeout: float = 60.0,
    ) -> None:
        self._store = store
        self._port = port
        self._server: ServerThread | None = None
        self._auth = AuthSubrequests(timeout=auth_timeout)
        self._upstream_timeout = upstream_timeout

    def stop(self) -> None:
        super().stop()
        self._auth.close()

    def wsgi_app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        host = urlsplit(f"//{request.host}").hostname or ""
        route = choose(self._store.list("ingresses"), host, request.path)
        if route is None:
            return _text(404, "404 Not Found: no Ingress path matches")(environ, start_response)
        uri = raw_uri(environ)
        client = str(environ.get("REMOTE_ADDR") or "")
        original = OriginalRequest(
            url=f"http://{request.host}{uri}",
            uri=uri,
            method=request.method,
            client=client,
            request_id=secrets.token_hex(16),
        )
        outcome = self._auth.check(dict(route.annotations), request, original)
        if isinstance(outcome, Refused):
            refused = Response(outcome.body, outcome.status, content_type=outcome.content_type)
            for name, value in outcome.headers:
                refused.headers[name] = value
            return refused(environ, start_response)
        try:
            address = backend_address(self._store, route.namespace, route.service, route.port)
        except NoBackend as exc:
            return _text(503, f"503 Service Unavailable: {exc}")(environ, start_response)
        replaced = {name.lower() for name in outcome.lifted} | set(_FORWARDING)
        headers = [
            (name, value)
            for name, value in end_to_end(request)
            if not name.lower().startswith("x-auth-request-") and name.lower() not in replaced
        ]
        headers += [(n, v) for n, v in outcome.lifted.items() if v is not None]
        headers += [
            ("X-Request-ID", original.request_id),
            ("X-Real-IP", client),
            ("X-Forwarded-For", client),
            ("X-Forwarded-Host", request.host),
            ("X-Forwarded-Port", str(environ.get("SERVER_PORT") or "")),
            ("X-Forwarded-Proto", "http"),
            ("X-Original-URI", uri),
        ]
        return self._forward(address, request, uri, headers, start_response)

    def _forward(
        self,
        address: tuple[str, int],
        request: Request,
        uri: str,
        headers: list[tuple[str, str]],
        start_response: Callable[..., Any],
    ) -> Iterable[bytes]:
        connection = http.client.HTTPConnection(
            *address, timeout=self._upstream_timeout, blocksize=_CHUNK
        )
        sized = request.content_length is not None
        chunked = bool(request.environ.get("wsgi.input_terminated")) and not sized
        body = request.stream if (sized and request.content_length) or chunked else None
        try:
            connection.request(request.method, uri, body=body, headers=_header_dict(headers))
            answer = connection.getresponse()
        except TimeoutError:
            connection.close()
            return _text(504, "504 Gateway Timeout")(request.environ, start_response)
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            _log.info("backend %s:%d failed: %s", *address, exc)
            return _text(502, "502 Bad Gateway")(request.environ, start_response)
        passed = [
            (name, value)
            for name, value in answer.getheaders()
            if name.lower() not in _hop_by_hop(answer) and name.lower() not in _NOT_FROM_BACKEND
        ]
        start_response(f"{answer.status} {answer.reason}", passed)
        return _stream(connection, answer)


def raw_uri(environ: dict[str, Any]) -> str:
    """The request target as the client sent it (path and query, still percent-encoded)."""
    target = environ.get("REQUEST_URI") or environ.get("RAW_URI")
    if target:
        return str(target)
    query = environ.get("QUERY_STRING")
    path = quote(str(environ.get("PATH_INFO") or "/"), safe="/:@!$&'()*+,;=-._~%")
    return f"{path}?{query}" if query else path


def _header_dict(headers: list[tuple[str, str]]) -> dict[str, str]:
    """Headers as ``http.client`` takes them: one value per name, repeated ones joined."""
    joined: dict[str, str] = {}
    for name, value in headers:
        key = next((k for k in joined if k.lower() == name.lower()), name)
        separator = "; " if name.lower() == "cookie" else ", "
        joined[key] = f"{joined[key]}{separator}{value}" if key in joined else value
    return joined


def _hop_by_hop(answer: http.client.HTTPResponse) -> set[str]:
    named = {n.strip().lower() for n in (answer.getheader("Connection") or "").split(",")}
    return set(HOP_BY_HOP) | named


def _stream(
    connection: http.client.HTTPConnection, answer: http.client.HTTPResponse
) -> Iterator[bytes]:
    """The backend's body as it arrives; the connection is closed when it ends (or the
    client goes away and the server closes this iterator)."""
    try:
        while True:
            try:
                data = answer.read1(_CHUNK)
            except (OSError, http.client.HTTPException):
                return  # the backend broke off; the client sees a short or unfinished body
            if not data:
                return
            yield data
    finally:
        answer.close()
        connection.close()


def _text(status: int, text: str) -> Response:
    return Response(text + "\n", status=status, content_type="text/plain; charset=utf-8")

"""The WSGI application: HTTP in, Kubernetes semantics out.

Deliberately raw WSGI rather than a framework: the per-request path (parse, maybe a fault,
one handler call, one ``json.dumps``, one audit record) is what the emulator's ~1 ms budget
is spent on. Watches are streamed from a generator that blocks on the watcher's own queue,
never on the store lock.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import select
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import parse_qsl

from devstack.kube import access_review, discovery, errors, protobuf, rbac, routing, tables
from devstack.kube.audit import AuditEntry, AuditLog, now
from devstack.kube.cluster.logs import PodLogs
from devstack.kube.faults import Decision, RequestFaults
from devstack.kube.handlers import Handlers
from devstack.kube.identity import Tokens, User
from devstack.kube.openapi import OpenApi
from devstack.kube.resources import ResourceRegistry, ResourceType
from devstack.kube.routing import RequestInfo
from devstack.kube.store import Store
from devstack.kube.watches import Watcher, WatchHub, stream_lines

_log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

CONTROL_PREFIX = "/_emulator/"
_STARTED = "emulator.started"
"""The environ key holding when the request reached the application."""

_REASONS = {
    200: "OK",
    201: "Created",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    413: "Request Entity Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def _json_response(
    start_response: StartResponse,
    code: int,
    body: Any,
    headers: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    payload = json.dumps(body, separators=(",", ":")).encode()
    start_response(
        f"{code} {_REASONS.get(code, 'Unknown')}",
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(payload))),
            *(headers or []),
        ],
    )
    return [payload]


class ApiServer:
    """A WSGI callable serving the Kubernetes API over a :class:`Store`."""

    def __init__(
        self,
        store: Store,
        hub: WatchHub,
        handlers: Handlers,
        audit: AuditLog,
        faults: RequestFaults,
        control: WsgiApp | None = None,
        *,
        served: ResourceRegistry,
        logs: PodLogs | None = None,
        latency: float = 0.0,
    ) -> None:
        self.latency = latency
        """Seconds every API request waits before it is handled (the control API's do not):
        a real API server answers in milliseconds, not in the emulator's fraction of one.
        Read at each request, so it can be changed while the server runs."""
        self._served = served
        self._store = store
        self._hub = hub
        self._handlers = handlers
        self._audit = audit
        self._faults = faults
        self._control = control
        self._logs = logs
        self._openapi = OpenApi(served)
        self._tokens = Tokens(store)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        environ[_STARTED] = now()
        path: str = environ.get("PATH_INFO", "") or "/"
        if self._control is not None and path.startswith(CONTROL_PREFIX):
            return self._control(environ, start_response)
        if self.latency > 0:
            time.sleep(self.latency)
        method: str = environ["REQUEST_METHOD"]
        query = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        watch = query.get("watch", "").lower() in ("true", "1")
        try:
            user = self._tokens.user(environ.get("HTTP_AUTHORIZATION", ""))
        except errors.ApiError as exc:
            self._record(environ, "", None, exc.code)
            return _json_response(start_response, exc.code, exc.status())
        # Paths that name no resource (discovery, OpenAPI, /version, health) are open to every
        # caller, as the bootstrap policy makes them; RBAC is asked about resources.
        if method == "GET" and path.startswith("/openapi/v3"):
            return self._openapi_v3(environ, start_response, path)
        try:
            info = routing.parse(self._served, method, path, watch=watch)
        except routing.NotRoutable:
            code, body = self._non_resource(method, path)
            self._record(environ, "get" if method == "GET" else method.lower(), None, code)
            return _json_response(start_response, code, body)
        try:
            self._authorize(user, info)
        except errors.ApiError as exc:
            self._record(environ, info.verb, info, exc.code)
            return _json_response(start_response, exc.code, exc.status())

        pause = self._faults.claim_pause(info.verb, info.resource.plural, info.namespace, info.name)
        if pause is not None:
            # Read the whole request first: the server has it, whatever its client does next.
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length) if length > 0 else b""
            environ["wsgi.input"] = io.BytesIO(body)
            self._faults.hold(pause)
        decision = self._faults.decide(info.verb, info.resource.plural)
        if decision.delay:
            self._faults.wait(decision.delay)
        if decision.error is not None or decision.hold is not None:
            return self._faulted(environ, start_response, info, decision)

        if info.verb == "watch":
            return self._watch(environ, start_response, info, query)
        if info.subresource == "log":
            return self._log(environ, start_response, info, query)
        try:
            code, body = self._dispatch(environ, info, query, user)
        except errors.ApiError as exc:
            code, body = exc.code, exc.status()
        except Exception:
            _log.exception("emulator failed on %s %s", method, path)
            code, body = 500, errors.internal_error("emulator error").status()
        self._record(environ, info.verb, info, code)
        return _json_response(start_response, code, body)

    # -- resource requests -----------------------------------------------------------------

    def _authorize(self, user: User, info: RequestInfo) -> None:
        """Raise the 405 of a verb the resource does not answer, or the 403 of one RBAC does
        not allow ``user``."""
        resource = info.resource
        if not info.subresource and info.verb not in resource.verbs:
            raise errors.method_not_allowed(f"{resource.plural} cannot be asked to {info.verb}")
        asked = rbac.Attributes(
            verb=info.verb,
            group=resource.group,
            resource=resource.plural,
            subresource=info.subresource,
            namespace=info.namespace or "",
            name=info.name or "",
        )
        if not rbac.decide(self._store, user, asked)[0]:
            why = rbac.denial(user, asked)
            raise errors.forbidden(resource.plural, info.name or "", why, resource.group)

    def _dispatch(
        self, environ: dict[str, Any], info: RequestInfo, query: dict[str, str], user: User
    ) -> tuple[int, Any]:
        verb = info.verb
        if verb == "get":
            return 200, _as_asked(environ, query, info, self._handlers.get(info))
        if verb == "list":
            return 200, _as_asked(environ, query, info, self._handlers.list(info, query))
        body = _read_json(environ)
        if verb == "create":
            if info.resource.plural in access_review.PLURALS:
                return 201, access_review.answer(self._store, user, info.resource.plural, body)
            if info.subresource == "token":
                return 201, self._tokens.request(info.namespace or "", info.name or "", body)
            if info.name is not None:
                raise errors.method_not_allowed("POST is not allowed on a named resource")
            return 201, self._handlers.create(info, body, query)
        if info.name is None and verb != "deletecollection":
            raise errors.method_not_allowed(f"{verb} needs an object name")
        if verb == "update":
            return 200, self._handlers.update(info, body, query)
        if verb == "patch":
            content_type = environ.get("CONTENT_TYPE", "")
            return 200, self._handlers.patch(info, body, content_type, query)
        if verb == "delete":
            return 200, self._handlers.delete(info, body, query)
        if verb == "deletecollection":
            return 200, self._handlers.delete_collection(info, body, query)
        raise errors.method_not_allowed(f"{environ['REQUEST_METHOD']} is not supported")

    def _watch(
        self,
        environ: dict[str, Any],
        start_response: StartResponse,
        info: RequestInfo,
        query: dict[str, str],
    ) -> Iterable[bytes]:
        try:
            predicate = self._handlers.predicate(query, info.name)
            timeout = _float_param(query, "timeoutSeconds")
            since_text = query.get("resourceVersion", "")
            watcher = Watcher(info.resource.plural, info.namespace, predicate)
            if since_text in ("", "0"):
                initial, since = self._store.snapshot(info.resource.plural, info.namespace)
            else:
                initial, since = [], _int_version(since_text)
            table = tables.requested(environ.get("HTTP_ACCEPT", ""), query)
        except errors.ApiError as exc:
            self._record(environ, "watch", info, exc.code)
            return _json_response(start_response, exc.code, exc.status())
        self._record(environ, "watch", info, 200)
        start_response("200 OK", [("Content-Type", "application/json")])
        try:
            self._hub.open(watcher, since, initial)
        except errors.ApiError as exc:
            # A real server answers 200 and reports expiry as the stream's only event.
            line = json.dumps({"type": "ERROR", "object": exc.status()}) + "\n"
            return [line.encode()]
        return self._stream(watcher, timeout, environ.get("werkzeug.socket"), table, info.resource)

    def _stream(
        self,
        watcher: Watcher,
        timeout: float | None,
        sock: socket.socket | None,
        table: tables.TableRequest | None,
        resource: ResourceType,
    ) -> Iterator[bytes]:
        try:
            # An empty first chunk makes the server send the headers now, so the client's
            # request returns even if nothing changes for a while.
            yield b""
            alive = (lambda: _peer_open(sock)) if sock is not None else None
            lines = stream_lines(watcher, timeout, alive)
            for line in lines if table is None else table.events(resource, lines):
                yield line.encode()
        finally:
            self._hub.remove(watcher)

    def _log(
        self,
        environ: dict[str, Any],
        start_response: StartResponse,
        info: RequestInfo,
        query: dict[str, str],
    ) -> Iterable[bytes]:
        """A container's output as plain text; followed, a stream until the container ends."""
        try:
            if info.verb != "get":
                raise errors.method_not_allowed("a pod's log can only be read")
            if self._logs is None or info.namespace is None or info.name is None:
                raise errors.not_found("pods", info.name or "")
            sock = environ.get("werkzeug.socket")
            alive = (lambda: _peer_open(sock)) if sock is not None else None
            chunks = self._logs.read(info.namespace, info.name, query, alive)
        except errors.ApiError as exc:
            self._record(environ, info.verb, info, exc.code)
            return _json_response(start_response, exc.code, exc.status())
        self._record(environ, info.verb, info, 200)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return chunks

    def _faulted(
        self,
        environ: dict[str, Any],
        start_response: StartResponse,
        info: RequestInfo,
        decision: Decision,
    ) -> list[bytes]:
        if decision.error is not None:
            self._record(environ, info.verb, info, decision.error.code)
            # A throttling API server (priority and fairness) says when to come back.
            throttled = [("Retry-After", "1")] if decision.error.code == 429 else None
            return _json_response(
                start_response, decision.error.code, decision.error.status(), throttled
            )
        self._faults.wait(decision.hold or 0.0)
        self._record(environ, info.verb, info, 504)
        sock = environ.get("werkzeug.socket")
        if sock is not None:
            # Drop the connection unanswered, as a hung server's load balancer would.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        timeout = errors.ApiError(504, "Timeout", "injected fault: the request timed out")
        return _json_response(start_response, 504, timeout.status())

    # -- everything else -------------------------------------------------------------------

    def _non_resource(self, method: str, path: str) -> tuple[int, Any]:
        parts = [p for p in path.split("/") if p]
        body: Any = None
        if method == "GET":
            if parts == ["version"]:
                body = discovery.version_info()
            elif parts == ["api"]:
                body = discovery.core_versions()
            elif parts == ["apis"]:
                body = discovery.group_list(self._served)
            elif len(parts) == 2 and parts[0] == "api":
                body = discovery.resource_list(self._served, "", parts[1])
            elif len(parts) == 2 and parts[0] == "apis":
                body = discovery.group(self._served, parts[1])
            elif len(parts) == 3 and parts[0] == "apis":
                body = discovery.resource_list(self._served, parts[1], parts[2])
            elif parts in (["healthz"], ["readyz"], ["livez"]):
                return 200, "ok"
        if body is None:
            error = errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
            return 404, error.status()
        return 200, body

    def _openapi_v3(
        self, environ: dict[str, Any], start_response: StartResponse, path: str
    ) -> Iterable[bytes]:
        """``/openapi/v3`` and the document of each group-version it lists."""
        key = path.removeprefix("/openapi/v3").strip("/")
        document = self._openapi.document(key) if key else None
        if key and document is None:
            code, body = self._non_resource("GET", path)
            self._record(environ, "get", None, code)
            return _json_response(start_response, code, body)
        self._record(environ, "get", None, 200)
        if document is None:
            return _json_response(start_response, 200, self._openapi.listing())
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(document)))]
        start_response("200 OK", headers)
        return [document]

    def _record(
        self, environ: dict[str, Any], verb: str, info: RequestInfo | None, code: int
    ) -> None:
        resource = info.resource if info is not None else None
        self._audit.record(
            AuditEntry(
                verb=verb,
                api_group=resource.group if resource else "",
                api_version=resource.version if resource else "",
                resource=resource.plural if resource else "",
                subresource=info.subresource if info else "",
                namespace=(info.namespace or "") if info else "",
                name=(info.name or "") if info else "",
                code=code,
                user_agent=environ.get("HTTP_USER_AGENT", ""),
                path=environ.get("PATH_INFO", ""),
                timestamp=now(),
                started=environ.get(_STARTED, 0.0),
            )
        )


def _as_asked(environ: dict[str, Any], query: dict[str, str], info: RequestInfo, body: Any) -> Any:
    """A get's object or a list, or its table when the client asks for one (``kubectl get``)."""
    table = tables.requested(environ.get("HTTP_ACCEPT", ""), query)
    if table is None:
        return body
    if info.verb == "list":
        return table.of_list(info.resource, body)
    return table.of_object(info.resource, body)


MAX_REQUEST_BYTES = 3 * 1024 * 1024
"""kube-apiserver's limit on a request body (``--max-request-bytes`` defaults to 3 MiB)."""


def _read_json(environ: dict[str, Any]) -> Any:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise errors.bad_request("invalid Content-Length") from None
    if length > MAX_REQUEST_BYTES:
        raise errors.ApiError(
            413,
            "RequestEntityTooLarge",
            f"Request entity too large: limit is {MAX_REQUEST_BYTES}",
        )
    raw = environ["wsgi.input"].read(length) if length > 0 else b""
    if not raw.strip():
        return None
    if protobuf.is_protobuf(environ.get("CONTENT_TYPE", "")):
        return protobuf.decode(raw)
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise errors.bad_request(f"the body of the request is not valid JSON: {exc}") from None


def _float_param(query: dict[str, str], name: str) -> float | None:
    raw = query.get(name)
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise errors.bad_request(f"invalid value for {name}: {raw!r}") from None


def _int_version(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise errors.bad_request(f"invalid resource version: {raw!r}") from None


def _peer_open(sock: socket.socket) -> bool:
    """Whether the watch's client is still connected (readable with no data = closed)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return True
        return sock.recv(1, socket.MSG_PEEK) != b""
    except (OSError, ValueError):
        return False

"""The ``/_emulator/`` control endpoints, for tests driving an emulator in another process.

They expose what in-process tests reach through the facade (audit log, request faults,
nodes, pod faults) and are never audited or faulted themselves.

    GET    /_emulator/audit        -> {"entries": [...]}
    DELETE /_emulator/audit        -> clear it
    PUT    /_emulator/faults       -> RequestFaults.configure(body)
    POST   /_emulator/nodes        -> cluster.add_node(**body)
    PUT    /_emulator/pod-faults   -> cluster.faults.set(kind, pattern, message)
    DELETE /_emulator/pod-faults   -> cluster.faults.clear()
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from devstack.kube import errors
from devstack.kube.audit import AuditLog
from devstack.kube.faults import RequestFaults

StartResponse = Callable[..., Any]

_NODE_FIELDS = ("labels", "taints", "images", "unschedulable", "ready")


class ControlApi:
    """WSGI app for the control endpoints; ``cluster`` is resolved late because the
    facade builds it after the HTTP side."""

    def __init__(self, audit: AuditLog, faults: RequestFaults, cluster: Callable[[], Any]) -> None:
        self._audit = audit
        self._faults = faults
        self._cluster = cluster

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        route = (environ["REQUEST_METHOD"], environ.get("PATH_INFO", "").rstrip("/"))
        try:
            code, body = self._handle(route, _body(environ))
        except errors.ApiError as exc:
            code, body = exc.code, exc.status()
        except (TypeError, ValueError) as exc:
            code, body = 400, errors.bad_request(str(exc)).status()
        payload = json.dumps(body).encode()
        start_response(
            f"{code} {'OK' if code < 400 else 'Error'}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
        )
        return [payload]

    def _handle(self, route: tuple[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        if route == ("GET", "/_emulator/audit"):
            return 200, {"entries": [e.to_dict() for e in self._audit.entries()]}
        if route == ("DELETE", "/_emulator/audit"):
            self._audit.clear()
            return 200, {}
        if route == ("PUT", "/_emulator/faults"):
            self._faults.configure(body)
            return 200, {}
        if route == ("POST", "/_emulator/nodes"):
            if not body.get("name"):
                raise errors.bad_request("a node needs a name")
            fields = {k: body[k] for k in _NODE_FIELDS if k in body}
            return 201, self._cluster().add_node(body["name"], **fields)
        if route == ("PUT", "/_emulator/pod-faults"):
            self._cluster().faults.set(body["kind"], body["pattern"], body.get("message"))
            return 200, {}
        if route == ("DELETE", "/_emulator/pod-faults"):
            self._cluster().faults.clear()
            return 200, {}
        raise errors.ApiError(404, "NotFound", f"no control endpoint {route[0]} {route[1]}")


def _body(environ: dict[str, Any]) -> dict[str, Any]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) if length > 0 else b""
    if not raw.strip():
        return {}
    parsed = json.loads(raw)
    if not isinstance(parsed, dict):
        raise ValueError("the body must be a JSON object")
    return parsed

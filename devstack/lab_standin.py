"""A stand-in for every lab's single-user server, so JupyterHub can reach labs locally.

Pods in the local stack are emulated: nothing listens at a lab's address. JupyterHub, once a
spawn completes, polls ``<internal_url>/user/<name>/`` until the server answers, and treats a
5xx as "not up yet". This server answers for every lab on one loopback port (the stack sets
``lab.internalUrl`` to it) and follows the emulated cluster: a user's path answers 200 only
while the emulator holds that user's lab pod Running with its lab container ready, as a real
Jupyter server would be reachable only then, and 503 otherwise.

It reads the emulator's store in-process instead of calling its API: it is part of the cluster
simulation, not a client of it. Lab pods are found the way the service finds them (namespace
``<prefix>-<user>``, the lab selector labels), using the service's own naming module so the two
can never disagree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from werkzeug.wrappers import Request, Response

from app.builders import names
from app.builders.metadata import lab_selector
from devstack.kube.store import Store
from devstack.serving import ServedEmulator, ServerThread

__all__ = ["JUPYTER_SERVER_VERSION", "LabStandIn", "serving"]

JUPYTER_SERVER_VERSION = "2.0.0"
"""What ``/api`` reports, in Jupyter Server's shape, so clients that read it see a version."""

_USER_PATH = re.compile(r"^(?:/[^/]+)*?/user/(?P<name>[^/]+)/(?P<rest>.*)$")
"""JupyterHub's per-user prefix ``/user/<name>/``, after an optional base URL (``/nb``)."""


def serving(pod: dict[str, Any]) -> bool:
    """Whether a lab in ``pod`` would answer: Running, its lab container ready, not deleting.

    A terminating pod is dropped from its Service's endpoints at once, so it counts as down
    even while its container still runs.
    """
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(
        container.get("name") == names.LAB_CONTAINER and container.get("ready") is True
        for container in status.get("containerStatuses") or []
    )


class LabStandIn(ServedEmulator):
    """Answers ``…/user/<name>/…`` for every user whose emulated lab pod is serving.

    ``namespace_prefix`` must be the service's ``namespacePrefix``, where it looks for labs.
    Only GET and HEAD are answered, as JupyterHub's checks use; other paths get 404.
    """

    _label = "lab stand-in"

    def __init__(self, store: Store, namespace_prefix: str, *, port: int = 0) -> None:
        self._store = store
        self._namespace_prefix = namespace_prefix
        self._port = port
        self._server: ServerThread | None = None

    @property
    def namespace_prefix(self) -> str:
        """Labs are looked for in ``<namespace_prefix>-<user>``."""
        return self._namespace_prefix

    def lab_pod(self, username: str) -> dict[str, Any] | None:
        """The user's lab pod while it is serving, else None."""
        namespace = names.lab_namespace(self._namespace_prefix, username)
        wanted = lab_selector(username).items()
        for pod in self._store.list("pods", namespace):
            labels = pod.get("metadata", {}).get("labels") or {}
            if wanted <= labels.items() and serving(pod):
                return pod
        return None

    def wsgi_app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """The WSGI entry point."""
        response = self._answer(Request(environ))
        return response(environ, start_response)

    def _answer(self, request: Request) -> Response:
        match = _USER_PATH.match(request.path)
        if match is None:
            return _json(404, {"message": "Not Found: not a path under /user/<name>/"})
        if request.method not in ("GET", "HEAD"):
            response = _json(405, {"message": "Method Not Allowed"})
            response.headers["Allow"] = "GET, HEAD"
            return response
        username = match["name"]
        if self.lab_pod(username) is None:
            return _json(503, {"message": f"the lab of {username} is not running"})
        if ("/" + match["rest"]).endswith("/api"):
            return _json(200, {"version": JUPYTER_SERVER_VERSION})
        return _json(200, {"lab": username, "standin": True})


def _json(status: int, body: dict[str, Any]) -> Response:
    """A JSON response; error bodies carry ``message`` as Jupyter Server's errors do."""
    return Response(json.dumps(body), status=status, mimetype="application/json")

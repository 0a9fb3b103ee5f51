"""The request id: taken from ``X-Request-Id`` or made, named in every log line of the
request, returned on every answer, and carried by the operation the request queues.

A WSGI middleware rather than Flask hooks: it sees every answer, a 404 of no route, a 413,
a 500 and an event stream alike, and it leaves the id in the environ that gunicorn hands
its access logger. The user is added once authenticated (:func:`note_user`), the route rule
once matched (:func:`note_route`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask, request

from app.log import (
    ENVIRON_REQUEST_ID,
    ENVIRON_ROUTE,
    ENVIRON_USER,
    REQUEST_ID_HEADER,
    accept_request_id,
    bind,
    logging_context,
)

_HEADER_KEY = "HTTP_" + REQUEST_ID_HEADER.upper().replace("-", "_")

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class RequestIdMiddleware:
    """Gives each request its id (see ``accept_request_id``) and answers with it."""

    def __init__(self, app: WsgiApp) -> None:
        self._app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        request_id = accept_request_id(environ.get(_HEADER_KEY))
        environ[ENVIRON_REQUEST_ID] = request_id

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            kept = [(k, v) for k, v in headers if k.lower() != REQUEST_ID_HEADER.lower()]
            kept.append((REQUEST_ID_HEADER, request_id))
            return start_response(status, kept, exc_info)

        # The context ends when the app returns: an event stream's body, iterated later by
        # the server, logs nothing of the request.
        with logging_context(request_id=request_id, user=None, operation=None, workload=None):
            return self._app(environ, start)


def note_user(username: str) -> None:
    """The request's caller is ``username``: named in its log lines and access line."""
    bind(user=username)
    request.environ[ENVIRON_USER] = username


def _note_route() -> None:
    if request.url_rule is not None:
        request.environ[ENVIRON_ROUTE] = request.url_rule.rule


def init_app(app: Flask) -> None:
    app.wsgi_app = RequestIdMiddleware(app.wsgi_app)  # type: ignore[method-assign]
    app.before_request(_note_route)

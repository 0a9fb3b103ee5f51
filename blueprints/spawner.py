"""The DMTN-222 lab routes: list, status, spawn, events, delete and user status."""

from __future__ import annotations

import re
from collections.abc import Iterator

from flask import (
    Blueprint,
    Response,
    jsonify,
    render_template,
    request,
    url_for,
)

from app.errors import ConflictError, InvalidRequestError, NotFoundError, PermissionDeniedError
from app.extensions import gafaelfawr_ext, labs_ext
from app.openapi import (
    DELEGATED_TOKEN,
    EVENT_STREAM,
    LAST_EVENT_ID,
    SPAWN_FORM,
    SPAWN_REDIRECT,
    USERNAMES,
    documented,
)
from app.schemas.labs import DeleteAcceptedSchema, LabStatusSchema, SpawnRequestSchema
from app.services.auth import ADMIN, ANY_USER, OWNER, TOKEN_HEADER
from app.services.form import build_spawn_form
from app.services.labs import LabService
from app.storage.event_hub import Following
from app.storage.events import Event
from app.web.auth import current_caller, requires
from app.web.bodies import load_body

spawner = Blueprint("spawner", __name__, url_prefix="/spawner/v1")

_spawn_request = SpawnRequestSchema()
"""Built once: a schema's construction copies its fields, and loading does not change it."""
_USERNAME = re.compile(r"^[a-z0-9](?:[a-z0-9]|-[a-z0-9])*$")
_EVENT_ID = re.compile(r"^\d+-\d+$")


def _service() -> LabService:
    return LabService(labs_ext.context, labs_ext.engine)


def _check_username(username: str) -> None:
    if len(username) > 55 or not _USERNAME.match(username):
        raise InvalidRequestError(f"invalid username {username!r}", field="username")


@spawner.get("/labs")
@documented(responses={200: USERNAMES})
@requires(ADMIN)
def list_labs() -> Response:
    """Usernames with a lab in any state."""
    return jsonify(_service().list_labs())


@spawner.get("/labs/<username>")
@documented(responses={200: LabStatusSchema}, errors=[NotFoundError])
@requires(ADMIN)
def lab_status(username: str) -> Response:
    """A lab's status, from Redis only."""
    return Response(_service().status_json(username), mimetype="application/json")


@spawner.get("/user-status")
@documented(responses={200: LabStatusSchema}, errors=[NotFoundError])
@requires(ANY_USER)
def user_status() -> Response:
    """The caller's own lab status."""
    return Response(_service().status_json(current_caller().username), mimetype="application/json")


@spawner.post("/labs/<username>/spawn")
@documented(
    request=SpawnRequestSchema,
    responses={303: SPAWN_REDIRECT},
    errors=[InvalidRequestError, ConflictError],
    headers=[DELEGATED_TOKEN],
)
@requires(OWNER)
def spawn(username: str) -> Response:
    """Queue a spawn; 303 to the lab's status."""
    _check_username(username)
    body = load_body(_spawn_request)
    caller = current_caller()
    token = _delegated_token(caller.token)
    user = gafaelfawr_ext.client.user_info(token)
    if user.username != username:
        raise PermissionDeniedError("the delegated token belongs to another user")
    _service().spawn(user, body["options"], body["env"], token)
    response = Response(status=303)
    response.headers["Location"] = url_for("spawner.lab_status", username=username)
    return response


def _delegated_token(bearer: str) -> str:
    """The token to give the lab: Gafaelfawr's delegated notebook token when the ingress
    added one (it must belong to the same user), else the caller's own token."""
    delegated = request.headers.get(TOKEN_HEADER, "").strip()
    if not delegated or delegated == bearer:
        return bearer
    data = gafaelfawr_ext.client.token_info(delegated)
    if data.username != current_caller().username:
        raise PermissionDeniedError(f"the {TOKEN_HEADER} token belongs to another user")
    return delegated


@spawner.get("/spawn-form/<username>")
@documented(responses={200: SPAWN_FORM})
@requires(OWNER)
def spawn_form(username: str) -> Response:
    """The spawn form for this user, an HTML fragment for JupyterHub's spawn page."""
    user = gafaelfawr_ext.client.user_info(current_caller().token)
    form = build_spawn_form(user, labs_ext.context.config, labs_ext.context.images)
    html = render_template("spawn_form.html", form=form)
    return Response(html, mimetype="text/html")


@spawner.delete("/labs/<username>")
@documented(responses={202: DeleteAcceptedSchema}, errors=[NotFoundError])
@requires(ADMIN)
def delete_lab(username: str) -> tuple[Response, int]:
    """Start deleting the lab; 202, or 404 if there is none."""
    _service().delete(username)
    body = DeleteAcceptedSchema().dump({"username": username, "status": "terminating"})
    return jsonify(body), 202


@spawner.get("/labs/<username>/events")
@documented(
    responses={200: EVENT_STREAM},
    errors=[InvalidRequestError, NotFoundError],
    headers=[LAST_EVENT_ID],
)
@requires(OWNER, ADMIN)
def lab_events(username: str) -> Response:
    """Server-sent events of the current operation: replay, then follow until it ends."""
    after = request.headers.get("Last-Event-ID", "0-0").strip() or "0-0"
    if not _EVENT_ID.match(after):
        raise InvalidRequestError("Last-Event-ID is not an event id", field="Last-Event-ID")
    following = _service().follow_events(username, after)
    if following is None:
        raise NotFoundError(f"user {username} has no lab operation to follow")
    # Passed straight to the server: no per-chunk encoding and closing wrappers.
    response = Response(
        _EventStreamBody(following), mimetype="text/event-stream", direct_passthrough=True
    )
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"
    return response


class _EventStreamBody:
    """The response body of an event stream: bytes, and no request context held (a worker
    serves thousands of these at once, and each event passes through here once per
    stream). The server closes it when the response ends or the client goes, which ends
    the following even if the body was never iterated."""

    def __init__(self, following: Following) -> None:
        self._following = following

    def __iter__(self) -> Iterator[bytes]:
        yield _OPENING
        for batch in self._following:
            yield _KEEPALIVE if batch is None else b"".join(map(_format, batch))

    def close(self) -> None:
        self._following.close()


_OPENING = b": stream of lab events\n\n"
_KEEPALIVE = b": keepalive\n\n"


def _format(event: Event) -> bytes:
    if "\n" in event.data:
        data = "\n".join(f"data: {line}" for line in event.data.split("\n"))
    else:
        data = f"data: {event.data}"
    return f"id: {event.id}\nevent: {event.type.value}\n{data}\n\n".encode()

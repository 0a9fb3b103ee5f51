"""The DMTN-222 lab routes: list, status, spawn, events, delete and user status."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from flask import Response, render_template, request, url_for

from app.errors import (
    ConflictError,
    DeleteFailedError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    QueueFullError,
    RebuildingError,
    TooManyRequestsError,
)
from app.extensions import gafaelfawr_ext, labs_ext, limits_ext
from app.models.identity import Caller, UserInfo
from app.models.lab import LabApi
from app.schemas.labs import DeleteAcceptedSchema, LabStatusSchema, SpawnRequestSchema
from app.services.auth import ADMIN, ANY_USER, OWNER, TOKEN_HEADER
from app.web.api import (
    USERNAME_MAX_LENGTH,
    USERNAME_PATTERN,
    ApiBlueprint,
    header_parameter,
    raises,
)
from app.web.event_frames import DmtnFrames, Frames, NubladoFrames
from app.web.event_stream import (
    STREAM_RETRY_SECONDS,
    documented_stream,
    last_event_id,
    stream_description,
    stream_example,
    stream_response,
)
from app.workloads.lab.form import build_spawn_form
from app.workloads.lab.service import LabService
from blueprints.support.auth import current_caller, current_user, requires

spawner = ApiBlueprint("spawner", __name__, url_prefix="/spawner/v1")

SPAWN_REQUEST = SpawnRequestSchema()
"""Built once, for DMTN-222's route and nublado's: a schema's construction copies its fields,
and loading does not change it."""
_USERNAME = re.compile(USERNAME_PATTERN)
USERNAMES = {
    "type": "array",
    "items": {"type": "string"},
    "description": "Usernames that have a lab in any state.",
}

EVENT_STREAM_TEXT = stream_description(
    "lab",
    "spawn or delete",
    "A lab created through nublado's `POST .../create` streams as nublado's controller "
    "does, for nublado's JupyterHub spawner: every `data` is JSON "
    '`{"message": ..., "progress": ...}` (the percentage an integer from 1 to 100, absent '
    "until there is one), there are no `progress` events (the percentage rides on the next "
    "message), and `ping` events keep the connection alive.",
)


def _service() -> LabService:
    return LabService(labs_ext.context, labs_ext.engine)


def _check_username(username: str) -> None:
    if len(username) > USERNAME_MAX_LENGTH or not _USERNAME.match(username):
        raise InvalidRequestError(f"invalid username {username!r}", field="username")


@spawner.get("/labs")
@spawner.response(200, USERNAMES, description="Usernames that have a lab in any state.")
@raises(RebuildingError)
@requires(ADMIN)
def list_labs() -> Response:
    """Usernames with a lab in any state (a plain list of strings: encoded as it is, without
    the app's JSON provider, for an administrator's tool polling it)."""
    return Response(
        json.dumps(_service().list_labs(), separators=(",", ":")), mimetype="application/json"
    )


@spawner.get("/labs/<username>")
@spawner.response(200, LabStatusSchema)
@raises(NotFoundError, RebuildingError)
@requires(ADMIN)
def lab_status(username: str) -> Response:
    """A lab's status, from Redis only."""
    return Response(_service().status_json(username), mimetype="application/json")


@spawner.get("/user-status")
@spawner.response(200, LabStatusSchema)
@raises(NotFoundError, RebuildingError)
@requires(ANY_USER)
def user_status() -> Response:
    """The caller's own lab status."""
    return Response(_service().status_json(current_caller().username), mimetype="application/json")


LAB_LOCATION = {
    "Location": {"description": "`/spawner/v1/labs/{username}`.", "schema": {"type": "string"}}
}
"""The ``Location`` header of an answer to a spawn: the lab's status."""

DELEGATED_TOKEN = header_parameter(
    TOKEN_HEADER,
    "Gafaelfawr's delegated notebook token, added by the ingress; it becomes the lab's token "
    "and must belong to the same user as the bearer token.",
)

SPAWN_ERRORS = (
    InvalidRequestError,
    ConflictError,
    RebuildingError,
    TooManyRequestsError,
    QueueFullError,
)
"""What ``queue_spawn`` can refuse with."""


@spawner.post("/labs/<username>/spawn")
@spawner.response(
    303, description="Spawn queued; follow `Location` for the lab's status.", headers=LAB_LOCATION
)
@spawner.doc(parameters=[DELEGATED_TOKEN])
@raises(*SPAWN_ERRORS)
@requires(OWNER, with_user=True)
@spawner.arguments(SPAWN_REQUEST)
def spawn(body: dict[str, Any], username: str) -> Response:
    """Queue a spawn; 303 to the lab's status."""
    queue_spawn(username, body, LabApi.DMTN_222)
    response = Response(status=303)
    response.headers["Location"] = url_for("spawner.lab_status", username=username)
    return response


def queue_spawn(username: str, body: dict[str, Any], api: LabApi) -> None:
    """The spawn request ``body`` (``SPAWN_REQUEST``'s), checked and queued: DMTN-222's route
    and nublado's take the same body and the same tokens, and the lab remembers which ``api``
    made it."""
    _check_username(username)
    caller = current_caller()
    with limits_ext.limits.change(caller, "lab"):
        token, user = _delegated_identity(caller)
        if user.username != username:
            raise PermissionDeniedError("the delegated token belongs to another user")
        admin = caller.is_admin
        _service().spawn(user, body["options"], body["env"], token, admin=admin, api=api)


def _delegated_identity(caller: Caller) -> tuple[str, UserInfo]:
    """The token to give the lab and its user: Gafaelfawr's delegated notebook token when
    the ingress added one (it must belong to the same user), else the caller's own."""
    delegated = request.headers.get(TOKEN_HEADER, "").strip()
    if not delegated or delegated == caller.token:
        return caller.token, current_user()
    data, user = gafaelfawr_ext.client.identity(delegated)
    if data.username != caller.username:
        raise PermissionDeniedError(f"the {TOKEN_HEADER} token belongs to another user")
    return delegated, user


@spawner.get("/spawn-form/<username>")
@spawner.text_response(
    "text/html",
    description=(
        "An HTML fragment for JupyterHub's spawn page: the images (prepulled ones as radio "
        "buttons, the recommended one first and selected; every other one in a dropdown), "
        "the sizes this user may have, and the debug and reset switches. Field names are the "
        "keys of the spawn request's `options`. A user who may not spawn gets a paragraph "
        "saying why."
    ),
    example='<div class="lab-spawner-form">...</div>',
)
@requires(OWNER, with_user=True)
def spawn_form(username: str) -> Response:
    """The spawn form for this user, an HTML fragment for JupyterHub's spawn page."""
    return render_spawn_form(debug_field="debug")


def render_spawn_form(*, debug_field: str) -> Response:
    """The caller's spawn form, its debug switch named ``debug_field`` (the name differs
    between DMTN-222's form and nublado's)."""
    ctx = labs_ext.context
    maintenance = labs_ext.machinery.maintenance.current()
    form = build_spawn_form(current_user(), ctx.config, ctx.images, maintenance)
    html = render_template("spawn_form.html", form=replace(form, debug_field=debug_field))
    return Response(html, mimetype="text/html")


@spawner.delete("/labs/<username>")
@spawner.response(202, DeleteAcceptedSchema)
@spawner.alt_response(
    204,
    success=True,
    description=(
        "A lab created through nublado's `POST .../create` is gone: its `DELETE` answers, as "
        "nublado's does, once the deletion has ended (within `lab.deleteTimeout`)."
    ),
)
@raises(NotFoundError, RebuildingError, TooManyRequestsError, DeleteFailedError)
@requires(ADMIN)
def delete_lab(username: str) -> Response | dict[str, str]:
    """Start deleting the lab; 202, or 404 if there is none. A lab created through nublado's
    route is waited for instead: 204 once it is gone."""
    service = _service()
    with limits_ext.limits.change(current_caller(), "lab"):
        api = service.delete(username)
    if api is LabApi.NUBLADO:
        service.wait_deleted(username)
        return Response(status=204)
    return {"username": username, "status": "terminating"}


@spawner.get("/labs/<username>/events")
@documented_stream(
    spawner,
    description=EVENT_STREAM_TEXT,
    example=stream_example("lab", "Lab creation requested"),
    event_types=["ping"],
)
@requires(OWNER, ADMIN)
def lab_events(username: str) -> Response:
    """Server-sent events of the current operation: replay, then follow until it ends."""
    after = last_event_id()
    release = limits_ext.limits.stream(current_caller(), retry_after=STREAM_RETRY_SECONDS)
    try:
        service = _service()
        following = service.follow_events(username, after)
        frames: Frames = DmtnFrames()
        if service.api(username) is LabApi.NUBLADO:
            frames = nublado = NubladoFrames()
            if after != "0-0":
                for seen in service.events_until(username, after):
                    nublado.see(seen)
    except BaseException:
        release()
        raise
    return stream_response(following, release, noun="lab", frames=frames)

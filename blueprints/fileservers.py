"""Users' file servers: WebDAV on demand to the files a user's lab sees. ``GET /files``
starts the caller's and says how to mount it; administrators list and stop them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from flask import Response, jsonify, request

from app.errors import (
    DependencyUnavailableError,
    InvalidRequestError,
    NotFoundError,
    RebuildingError,
)
from app.extensions import labs_ext
from app.models.workload import WorkloadStatus
from app.services.auth import ADMIN, Grant
from app.web.api import ApiBlueprint, raises
from app.web.event_stream import documented_stream, stream_description, stream_example
from app.workloads.fileserver.builders import server_url
from app.workloads.fileserver.page import access, render_page
from app.workloads.fileserver.schemas import (
    FileserverAccessSchema,
    FileserverSchema,
    RunningSchema,
    UserStatusSchema,
)
from app.workloads.fileserver.service import FileserverFailedError, FileserverService
from blueprints.support.auth import current_caller, current_user, requires
from blueprints.support.events import workload_events

FILES_SCOPE = "write:files"
FILES_USER = Grant(FILES_SCOPE, setting="fileserver.scope")
"""A user with the file servers' scope (``fileserver.scope``), acting for themself."""
FILES_OWNER = Grant(FILES_SCOPE, same_user=True, setting="fileserver.scope")
"""The path's user, with the file servers' scope."""

fileservers = ApiBlueprint("fileservers", __name__)


@fileservers.before_request
def _enabled() -> None:
    """Where file servers are not enabled, their routes do not exist (each documents 404)."""
    _service().require_enabled()


def _service() -> FileserverService:
    return FileserverService(labs_ext.context, labs_ext.engine)


def _wants_json() -> bool:
    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    return best == "application/json"


@fileservers.get("/files")
@fileservers.text_response(
    "text/html",
    description=(
        "A page saying where the caller's file server is and how to mount it (Linux davfs2, "
        "macOS Finder, Windows). A client that prefers `application/json` gets "
        '`{"username", "url", "running", "mounts": [{"name", "path", "readOnly", "url"}]}`.'
    ),
    example="<!doctype html>...",
)
@raises(
    NotFoundError,
    InvalidRequestError,
    RebuildingError,
    DependencyUnavailableError,
    FileserverFailedError,
)
@requires(FILES_USER, with_user=True)
def user_fileserver() -> Response:
    """The caller's file server: started if none runs, and answered once it serves (within
    `fileserver.creationTimeout`); at once while one runs."""
    service = _service()
    user = current_user()
    service.ensure(user)
    found = access(labs_ext.context.config, user.username)
    if _wants_json():
        return jsonify(FileserverAccessSchema().dump(found))
    return Response(render_page(service.config, found), mimetype="text/html")


@fileservers.get("/fileserver/v1/user-status")
@fileservers.response(200, UserStatusSchema)
@raises(NotFoundError, RebuildingError)
@requires(FILES_USER)
def user_status() -> dict[str, Any]:
    """The caller's file server: `{"running": true, ...}` while it serves, `false` while it
    starts or stops; 404 when there is none."""
    service = _service()
    username = current_caller().username
    record = service.one(username)
    return {
        "running": record.status is WorkloadStatus.RUNNING,
        "username": username,
        "url": server_url(service.config, username),
    }


@fileservers.get("/fileserver/v1/users")
@fileservers.response(200, {"type": "array", "items": {"type": "string"}})
@raises(NotFoundError, RebuildingError)
@requires(ADMIN)
def fileserver_users() -> Response:
    """The users with a file server, sorted."""
    return jsonify(_service().users())


@fileservers.get("/fileserver/v1/users/<username>")
@fileservers.response(200, RunningSchema)
@raises(NotFoundError, RebuildingError)
@requires(ADMIN)
def fileserver_user(username: str) -> dict[str, bool]:
    """`{"running": true}` when the user has a file server, else 404."""
    _service().running(username)
    return {"running": True}


@fileservers.delete("/fileserver/v1/users/<username>")
@fileservers.response(204, description="The file server is gone.")
@raises(NotFoundError, RebuildingError)
@requires(ADMIN)
def delete_fileserver_user(username: str) -> Response:
    """Stop the user's file server; 204 once it is gone, 404 if there is none."""
    _service().stop_and_wait(username)
    return Response(status=204)


@fileservers.get("/spawner/v1/fileservers/<username>")
@fileservers.response(200, FileserverSchema)
@raises(NotFoundError, RebuildingError)
@requires(FILES_OWNER, ADMIN)
def fileserver(username: str) -> dict[str, Any]:
    """The user's file server: its status, and where it is."""
    service = _service()
    record = service.one(username)
    return {**asdict(record), "url": server_url(service.config, username)}


@fileservers.get("/spawner/v1/fileservers/<username>/events")
@documented_stream(
    fileservers,
    description=stream_description("file server", "start or deletion"),
    example=stream_example("file server", "File server of rachel requested"),
)
@raises(NotFoundError, RebuildingError)
@requires(FILES_OWNER, ADMIN)
def fileserver_events(username: str) -> Response:
    """Server-sent events of the file server's current operation: replay, then follow
    until it ends."""
    return workload_events(
        lambda after: _service().events(username, after=after), noun="file server"
    )


@fileservers.delete("/spawner/v1/fileservers/<username>")
@fileservers.response(202, FileserverSchema, description="The file server, terminating.")
@raises(NotFoundError, RebuildingError)
@requires(FILES_OWNER, ADMIN)
def stop_fileserver(username: str) -> tuple[dict[str, Any], int]:
    """Start stopping the user's file server; 202, or 404 if there is none."""
    service = _service()
    record = service.stop(username)
    return {**asdict(record), "url": server_url(service.config, username)}, 202

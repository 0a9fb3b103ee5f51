"""Groups' apps: the templates, and making, reading, changing, stopping, starting, reading
the log of and deleting a group's apps. A group's members manage its apps; administrators
manage all."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import asdict
from typing import Any

from flask import Response

from app.errors import (
    BUDGETED_CREATION_ERRORS,
    ConflictError,
    NotFoundError,
    RebuildingError,
    TooManyRequestsError,
)
from app.extensions import labs_ext, limits_ext
from app.models.config import AppTemplate
from app.services.auth import ADMIN, ANY_USER
from app.web.api import ApiBlueprint, raises
from app.web.event_stream import (
    documented_stream,
    stream_description,
    stream_example,
)
from app.workloads.app.builders import app_url
from app.workloads.app.models import AppRecord
from app.workloads.app.schemas import (
    AppChangeSchema,
    AppListQuerySchema,
    AppLogsSchema,
    AppRequestSchema,
    AppSchema,
    AppTemplateSchema,
    LogsQuerySchema,
)
from app.workloads.app.service import AppChange, AppRequest, AppService, Switched
from blueprints.support.auth import current_caller, current_user, requires
from blueprints.support.events import workload_events

apps = ApiBlueprint("apps", __name__, url_prefix="/spawner/v1")


def _service() -> AppService:
    admin = current_caller().is_admin
    return AppService(labs_ext.context, labs_ext.engine, admin=admin)


def _body(record: AppRecord) -> dict[str, Any]:
    """The app as its routes serve it (``AppSchema``): its record, and where its pages are."""
    return {**asdict(record), "url": app_url(labs_ext.context.config.apps, record.id)}


def _template(template: AppTemplate) -> dict[str, Any]:
    return {
        "name": template.name,
        "version": template.version,
        "description": template.description,
        "doc_link": template.doc_link,
        "image": template.pod_spec["containers"][0]["image"],
        "http_port": template.http_port,
        "default_envs": [
            {
                "name": v.name,
                "description": v.description,
                "default_value": v.default,
                "optional": v.optional,
            }
            for v in template.variables
        ],
    }


def _changing() -> AbstractContextManager[None]:
    """The caller's change of an app, counted against their changes a minute (and given
    back if refused)."""
    return limits_ext.limits.change(current_caller(), "app")


@apps.get("/app-templates")
@apps.response(200, AppTemplateSchema(many=True))
@requires(ANY_USER, ADMIN)
def templates() -> list[dict[str, Any]]:
    """The templates groups make apps from."""
    return [_template(t) for t in labs_ext.context.config.apps.templates]


@apps.post("/apps")
@apps.response(201, AppSchema, description="The app, starting.")
@raises(*BUDGETED_CREATION_ERRORS)
@requires(ANY_USER, ADMIN, with_user=True)
@apps.arguments(AppRequestSchema())
def create_group_app(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Make an app of the group from a template, within the group's quota; the caller must
    be in the group. A required variable without a value is a 422 naming it."""
    app_request = AppRequest(
        template=body["template"],
        group=body["group"],
        name=body["name"],
        size=body["size"],
        scope=body["scope"],
        env=dict(body.get("env") or {}),
    )
    with _changing():
        return _body(_service().create(current_user(), app_request)), 201


@apps.get("/apps")
@apps.response(200, AppSchema(many=True))
@raises(RebuildingError)
@requires(ANY_USER, ADMIN, with_user=True)
@apps.arguments(AppListQuerySchema(), location="query")
def list_apps(query: dict[str, Any]) -> list[dict[str, Any]]:
    """The apps of the caller's groups (of every group, for an administrator), oldest first."""
    return [_body(r) for r in _service().apps(current_user(), query.get("group"))]


@apps.get("/apps/<app_id>")
@apps.response(200, AppSchema)
@raises(NotFoundError, RebuildingError)
@requires(ANY_USER, ADMIN, with_user=True)
def app(app_id: str) -> dict[str, Any]:
    """One app, with its phase."""
    return _body(_service().app(current_user(), app_id))


@apps.patch("/apps/<app_id>")
@apps.response(202, AppSchema, description="The app, updating.")
@raises(*BUDGETED_CREATION_ERRORS, NotFoundError)
@requires(ANY_USER, ADMIN, with_user=True)
@apps.arguments(AppChangeSchema())
def update_app(body: dict[str, Any], app_id: str) -> tuple[dict[str, Any], int]:
    """Change the app's variables (all of them), scope or size; its pod is replaced, the
    old one serving until the new one is ready."""
    change = AppChange(env=body.get("env"), size=body.get("size"), scope=body.get("scope"))
    with _changing():
        return _body(_service().update(current_user(), app_id, change)), 202


@apps.post("/apps/<app_id>/stop")
@apps.response(202, AppSchema, description="The app, stopping.")
@apps.alt_response(
    200, schema=AppSchema, success=True, description="The app, stopped (or stopping) already."
)
@raises(NotFoundError, ConflictError, TooManyRequestsError, RebuildingError)
@requires(ANY_USER, ADMIN, with_user=True)
def stop_app(app_id: str) -> tuple[dict[str, Any], int]:
    """Stop the app: its pod goes and it uses none of the group's quota; it keeps its data.
    A stop of an app stopped already changes nothing (200)."""
    with _changing():
        return _switched(_service().stop(current_user(), app_id))


@apps.post("/apps/<app_id>/start")
@apps.response(202, AppSchema, description="The app, starting.")
@apps.alt_response(
    200, schema=AppSchema, success=True, description="The app, running (or starting) already."
)
@raises(*BUDGETED_CREATION_ERRORS, NotFoundError)
@requires(ANY_USER, ADMIN, with_user=True)
def start_app(app_id: str) -> tuple[dict[str, Any], int]:
    """Start a stopped app again, within the group's quota (or one in Error once more). A
    start of an app that runs changes nothing (200)."""
    with _changing():
        return _switched(_service().start(current_user(), app_id))


def _switched(switched: Switched) -> tuple[dict[str, Any], int]:
    return _body(switched.record), 202 if switched.queued else 200


@apps.get("/apps/<app_id>/logs")
@apps.response(200, AppLogsSchema)
@raises(NotFoundError, RebuildingError)
@requires(ANY_USER, ADMIN, with_user=True)
@apps.arguments(LogsQuerySchema(), location="query")
def app_logs(query: dict[str, Any], app_id: str) -> dict[str, Any]:
    """The last lines the app's pod wrote, through the Kubernetes API."""
    logs = _service().logs(current_user(), app_id, tail=query["tail"])
    return {"pod": logs.pod, "lines": logs.lines}


@apps.delete("/apps/<app_id>")
@apps.response(202, AppSchema, description="The app, terminating.")
@raises(NotFoundError, TooManyRequestsError, RebuildingError)
@requires(ANY_USER, ADMIN, with_user=True)
def delete_app(app_id: str) -> tuple[dict[str, Any], int]:
    """Start deleting the app and its objects (the group's storage keeps its data)."""
    with _changing():
        return _body(_service().delete(current_user(), app_id)), 202


@apps.get("/apps/<app_id>/events")
@documented_stream(
    apps,
    description=stream_description("app", "creation, change or deletion"),
    example=stream_example("app", "App 7k2m9q requested"),
)
@requires(ANY_USER, ADMIN, with_user=True)
def app_events(app_id: str) -> Response:
    """Server-sent events of the app's current operation, for its group's members:
    replay, then follow until it ends."""
    user = current_user()
    return workload_events(lambda after: _service().events(user, app_id, after=after), noun="app")

"""Groups' apps through the service: the templates, and making, reading, changing, stopping,
starting, reading the log of and deleting a group's apps.

Reached as ``LabSpawnerClient.apps``. A group's members manage its apps, administrators all.
Waiting is polling: an app's state is one small record, and its changes are few.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests

from labspawner.errors import AppFailedError, LabSpawnerError, NotFoundError
from labspawner.models import App

POLL_SECONDS = 0.5

Request = Callable[..., requests.Response]
"""``LabSpawnerClient._request``: (method, path, **requests' arguments)."""


class Apps:
    """The app calls of one :class:`~labspawner.LabSpawnerClient`."""

    def __init__(self, request: Request) -> None:
        self._request = request

    def templates(self) -> list[dict[str, Any]]:
        """The templates apps are made from: name, version, description, doc link, image,
        HTTP port and the variables a group fills in (``default_envs``)."""
        return list(self._request("GET", "/app-templates").json())

    def create(
        self,
        template: str,
        group: str,
        name: str,
        *,
        size: str,
        env: dict[str, str] | None = None,
        scope: str = "group",
        wait: bool = True,
        timeout: float = 300.0,
    ) -> App:
        """Make an app of ``group`` from ``template``; with ``wait``, return it once Ready.

        ``scope`` says who reaches its pages: ``public``, ``platform`` (anyone logged in) or
        ``group``. Raises :class:`AppFailedError` if it goes into Error while waited for, and
        the service's errors as they come (``InvalidRequestError`` naming a required variable
        without a value, ``ConflictError`` with code ``quota_exceeded`` past the group's
        quota, ``PermissionDeniedError`` for a group the caller is not in).
        """
        body = {
            "template": template,
            "group": group,
            "name": name,
            "size": size,
            "scope": scope,
            "env": env or {},
        }
        made = App.from_json(self._request("POST", "/apps", json=body).json())
        return self.wait(made.id, timeout=timeout) if wait else made

    def of(self, group: str | None = None) -> list[App]:
        """The apps of ``group``, or of every group of the caller."""
        params = {"group": group} if group is not None else None
        return [App.from_json(a) for a in self._request("GET", "/apps", params=params).json()]

    def get(self, app_id: str) -> App:
        """One app; :class:`NotFoundError` if there is none of that id."""
        return App.from_json(self._request("GET", f"/apps/{app_id}").json())

    def update(
        self,
        app_id: str,
        *,
        env: dict[str, str] | None = None,
        size: str | None = None,
        scope: str | None = None,
        wait: bool = True,
        timeout: float = 300.0,
    ) -> App:
        """Change the app's variables (``env`` replaces them all), size or scope; with
        ``wait``, return it once Ready again."""
        body = {
            key: value
            for key, value in {"env": env, "size": size, "scope": scope}.items()
            if value is not None
        }
        changed = App.from_json(self._request("PATCH", f"/apps/{app_id}", json=body).json())
        return self.wait(app_id, timeout=timeout) if wait else changed

    def stop(self, app_id: str, *, wait: bool = True, timeout: float = 120.0) -> App:
        """Stop the app (its pod goes; its data stays); with ``wait``, once Stopped."""
        stopped = App.from_json(self._request("POST", f"/apps/{app_id}/stop").json())
        return self.wait(app_id, phase="Stopped", timeout=timeout) if wait else stopped

    def start(self, app_id: str, *, wait: bool = True, timeout: float = 300.0) -> App:
        """Start a stopped app; with ``wait``, return it once Ready."""
        started = App.from_json(self._request("POST", f"/apps/{app_id}/start").json())
        return self.wait(app_id, timeout=timeout) if wait else started

    def logs(self, app_id: str, *, tail: int = 100) -> list[str]:
        """The last ``tail`` lines the app's pod wrote (none while it has no pod)."""
        answer = self._request("GET", f"/apps/{app_id}/logs", params={"tail": tail}).json()
        return list(answer["lines"])

    def delete(self, app_id: str, *, wait: bool = False, timeout: float = 120.0) -> None:
        """Delete the app; with ``wait``, return once the service no longer has it."""
        self._request("DELETE", f"/apps/{app_id}")
        deadline = time.monotonic() + timeout
        while wait:
            try:
                self.get(app_id)
            except NotFoundError:
                return
            if time.monotonic() > deadline:
                raise LabSpawnerError(f"app {app_id} was not deleted in time", code="timeout")
            time.sleep(POLL_SECONDS)

    def wait(self, app_id: str, *, phase: str = "Ready", timeout: float = 300.0) -> App:
        """The app once in ``phase``; :class:`AppFailedError` if it goes into Error first."""
        deadline = time.monotonic() + timeout
        while True:
            app = self.get(app_id)
            if app.phase == phase and app.status == "running":
                return app
            if app.failed:
                raise AppFailedError(f"app {app_id} failed: {app.message}", code="failed")
            if time.monotonic() > deadline:
                raise LabSpawnerError(
                    f"app {app_id} was not {phase} in time ({app.phase})", code="timeout"
                )
            time.sleep(POLL_SECONDS)

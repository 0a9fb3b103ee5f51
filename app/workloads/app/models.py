"""A group's app: what the group asked for, and the phase it is in.

An app is a third-party web application (MLflow, a dashboard, a small database) made from a
configured template, owned by a group rather than a user, and served at ``/apps/<id>/`` on
the platform's domain to whom its scope admits. Its phase is read from its Deployment
exactly as the apps design defines it, so that what a group sees is what Kubernetes runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from app.models.workload import WorkloadStatus


class AppScope(StrEnum):
    """Who reaches the app's web pages (its API, through this service, is the group's)."""

    PUBLIC = "public"
    """Anyone, without logging in."""
    PLATFORM = "platform"
    """Anyone logged in to the platform."""
    GROUP = "group"
    """The group's members."""


class AppPhase(StrEnum):
    """The phases of the apps design, read from the app's Deployment."""

    STARTING = "Starting"
    READY = "Ready"
    UPDATING = "Updating"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    ERROR = "Error"


@dataclass(frozen=True)
class AppState:
    """A phase and the message that explains it (the reason, for ``Error``)."""

    phase: AppPhase
    message: str = ""


@dataclass(frozen=True)
class AppRecord:
    """What the service keeps of an app: the group's choices, and its last known phase.

    ``env`` holds the variables the group set (not the template's defaults nor the preset
    ones), so an update can change them and a new template default reaches the app on its
    next update.
    """

    id: str
    group: str
    template: str
    template_version: str
    name: str
    scope: AppScope
    size: str
    env: dict[str, str]
    stopped: bool
    created: str
    creator: str
    phase: AppPhase = AppPhase.STARTING
    message: str = ""
    status: WorkloadStatus = WorkloadStatus.RUNNING
    """The engine's status: ``running`` while the app exists, whatever its phase (an app
    that cannot run stays, in Error, to be changed or deleted), ``terminating`` once its
    delete is queued."""

    def with_state(self, state: AppState) -> AppRecord:
        return replace(self, phase=state.phase, message=state.message)


OBSERVED_FIELDS = frozenset({"phase", "message", "status"})
"""What an app's record holds beside the group's choices: its phase and message, read from
its Deployment, and the engine's status. Its Deployment keeps the rest, the group's choices,
so that a record Redis lost is rebuilt from Kubernetes (``app.workloads.app.records``)."""

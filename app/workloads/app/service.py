"""Groups' apps: who may act on which, the checks of a request, the group's quota.

An app belongs to a group: any member manages it, and an administrator manages all. Every
change (create, update, stop, start) records what the app should be and queues the one
operation that brings it there; a request the app cannot take (a template or size that does
not exist, a required variable without a value, a group past its quota) is refused before
anything is recorded or created.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from app.builders import names
from app.engine.engine import Engine
from app.engine.service import RecordCodec, WorkloadService
from app.errors import (
    ConflictError,
    InvalidRequestError,
    PermissionDeniedError,
    QuotaExceededError,
    RebuildingError,
)
from app.models.config import AppQuota, AppTemplate
from app.models.identity import UserInfo
from app.models.sizes import PodSize
from app.models.workload import WorkloadStatus
from app.quantities import format_cpu, format_memory
from app.storage.event_hub import Following
from app.storage.events import EventType
from app.timestamps import iso_utc
from app.workloads.app.builders import app_selector, missing_variables
from app.workloads.app.models import AppPhase, AppRecord, AppScope, AppState
from app.workloads.app.records import app_json, parse_app
from app.workloads.app.tracking import selector_text
from app.workloads.budgets import budget_lock
from app.workloads.context import WorkloadContext
from app.workloads.refs import APP_KIND, app_ref
from app.workloads.sizes import pod_size

ID_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The letters of an app id's random part (no vowels: no words by chance)."""
ID_LENGTH = 5
GROUP_LOCK_PREFIX = "apps-group:"
"""The quota lock of a group shares the budget locks' keys, apart by this prefix."""


@dataclass(frozen=True)
class AppRequest:
    template: str
    group: str
    name: str
    size: str
    scope: str
    env: dict[str, str]


@dataclass(frozen=True)
class AppChange:
    env: dict[str, str] | None = None
    size: str | None = None
    scope: str | None = None


@dataclass(frozen=True)
class AppLogs:
    pod: str | None
    lines: list[str]


SWITCH_ATTEMPTS = 5
"""Reads and writes a stop or a start tries while the record changes under it."""

SETTLED = {
    True: frozenset({AppPhase.STOPPING, AppPhase.STOPPED}),
    False: frozenset({AppPhase.STARTING, AppPhase.READY, AppPhase.UPDATING}),
}
"""The phases in which a stopped (True) or started (False) app needs no switch: it is so,
or on its way. A started app in Error is started again."""


class ChangedMeanwhile(ConflictError):
    """The app's record changed between its read and the write that expected it."""


@dataclass(frozen=True)
class Switched:
    """A stop's or a start's answer: the app, and whether an operation was queued (False:
    it was so already, and nothing changed)."""

    record: AppRecord
    queued: bool


APP_RECORDS = RecordCodec(
    kind=APP_KIND,
    noun="app",
    parse=parse_app,
    dump=app_json,
    terminating=lambda record: replace(record, status=WorkloadStatus.TERMINATING),
)


class AppService(WorkloadService[AppRecord]):
    def __init__(self, ctx: WorkloadContext, engine: Engine, *, admin: bool) -> None:
        super().__init__(engine, APP_RECORDS, idle_seconds=ctx.config.operations.keepalive_seconds)
        self._ctx = ctx
        self._admin = admin

    # Reads ---------------------------------------------------------------------------

    def templates(self) -> tuple[AppTemplate, ...]:
        return self._ctx.config.apps.templates

    def apps(self, caller: UserInfo, group: str | None) -> list[AppRecord]:
        """The apps of ``group`` (the caller's to see), or of every group of the caller (of
        every group, for an administrator); oldest first."""
        if group is not None:
            self._member(caller, group)
        records = self.all()
        mine = {g.name for g in caller.groups}
        shown = [
            r
            for r in records
            if (r.group == group if group is not None else self._admin or r.group in mine)
        ]
        return sorted(shown, key=lambda r: (r.created, r.id))

    def app(self, caller: UserInfo, app_id: str) -> AppRecord:
        record = self.find(app_ref(app_id), missing=_missing(app_id))
        self._member(caller, record.group)
        return record

    def events(self, caller: UserInfo, app_id: str, *, after: str) -> Following:
        """The events of the app's creation, change or deletion, from after ``after``: for
        the members of its group (and administrators) only."""
        self.app(caller, app_id)
        return self.follow_events(app_ref(app_id), after=after, missing=_missing(app_id))

    def logs(self, caller: UserInfo, app_id: str, *, tail: int) -> AppLogs:
        """The last ``tail`` lines of the app's pod's log (the newest pod, during an
        update); none while the app has no pod."""
        record = self.app(caller, app_id)
        namespace = names.apps_namespace(self._ctx.config.namespace_prefix, record.group)
        pods = self._ctx.kube.list_pods(namespace, selector_text(app_selector(record.id)))
        if not pods:
            return AppLogs(pod=None, lines=[])
        newest = max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")
        name = newest["metadata"]["name"]
        text = self._ctx.kube.read_pod_log(namespace, name, tail_lines=tail) or ""
        return AppLogs(pod=name, lines=text.splitlines()[-tail:])

    # Changes -------------------------------------------------------------------------

    def create(self, caller: UserInfo, request: AppRequest) -> AppRecord:
        config = self._ctx.config.apps
        template = config.template(request.template)
        if template is None:
            known = ", ".join(t.name for t in config.templates) or "none"
            raise InvalidRequestError(
                f"no template {request.template} (templates: {known})", field="template"
            )
        self._member(caller, request.group)
        size = self._size(request.size, request.group)
        missing = missing_variables(template, request.env)
        if missing:
            raise InvalidRequestError(
                f"required variables without a value: {', '.join(missing)}", field="env"
            )
        record = AppRecord(
            id=f"{template.name}-{_random_part()}",
            group=request.group,
            template=template.name,
            template_version=template.version,
            name=request.name,
            scope=AppScope(request.scope),
            size=size.name,
            env=dict(request.env),
            stopped=False,
            created=iso_utc(time.time()) or "",
            creator=caller.username,
        )
        with self._group_lock(record.group):
            self._within_quota(record, size)
            queued = self._engine.queue_spawn(
                app_ref(record.id),
                record=app_json(record),
                spec={"change": "create"},
                secret=None,
                first_events=[(EventType.INFO, f"App {record.id} requested by {caller.username}")],
                group=record.group,
            )
        if queued.rebuilding:
            raise RebuildingError()
        if not queued.queued:
            raise ConflictError(f"an app {record.id} exists already; ask again")
        return record

    def update(self, caller: UserInfo, app_id: str, change: AppChange) -> AppRecord:
        current = self.app(caller, app_id)
        template = self._ctx.config.apps.template(current.template)
        if template is None:
            raise ConflictError(f"the app's template {current.template} is no longer offered")
        env = current.env if change.env is None else dict(change.env)
        missing = missing_variables(template, env)
        if missing:
            raise InvalidRequestError(
                f"required variables without a value: {', '.join(missing)}", field="env"
            )
        size = self._size(change.size or current.size, current.group)
        wanted = replace(
            current,
            env=env,
            size=size.name,
            scope=AppScope(change.scope) if change.scope else current.scope,
        )
        return self._change(caller, current, wanted, size, "update")

    def stop(self, caller: UserInfo, app_id: str) -> Switched:
        return self._switch(caller, app_id, stopped=True)

    def start(self, caller: UserInfo, app_id: str) -> Switched:
        return self._switch(caller, app_id, stopped=False)

    def _switch(self, caller: UserInfo, app_id: str, *, stopped: bool) -> Switched:
        """Stop or start the app, unless it is so already (or on its way): then nothing
        changes, and the answer says so. The record may change between its read and the
        write (its phase, read from Kubernetes, moves on its own): the switch is then
        decided again from the new one, so a start sent as soon as the app reads Stopped
        is never refused for it."""
        change = "stop" if stopped else "start"
        for _ in range(SWITCH_ATTEMPTS):
            current = self.app(caller, app_id)
            if current.stopped == stopped and current.phase in SETTLED[stopped]:
                return Switched(current, queued=False)
            size = self._size(current.size, current.group, checked=not stopped)
            try:
                wanted = self._change(
                    caller, current, replace(current, stopped=stopped), size, change
                )
            except ChangedMeanwhile:
                continue
            return Switched(wanted, queued=True)
        raise ConflictError(f"app {app_id} keeps changing; ask again")

    def delete(self, caller: UserInfo, app_id: str) -> AppRecord:
        self.app(caller, app_id)
        return self.start_delete(
            app_ref(app_id),
            missing=_missing(app_id),
            first_events=[(EventType.INFO, f"Deletion of app {app_id} requested")],
        )

    def _change(
        self, caller: UserInfo, current: AppRecord, wanted: AppRecord, size: PodSize, change: str
    ) -> AppRecord:
        """Record ``wanted`` over ``current`` and queue the operation that brings the app
        there: refused while the app is being deleted or another change is under way."""
        if current.status is WorkloadStatus.TERMINATING:
            raise ConflictError(f"app {current.id} is being deleted")
        phase = {"stop": AppPhase.STOPPING, "start": AppPhase.STARTING}.get(
            change, AppPhase.UPDATING
        )
        wanted = wanted.with_state(AppState(phase, ""))
        with self._group_lock(current.group):
            if not wanted.stopped:
                self._within_quota(wanted, size)
            queued = self._engine.queue_spawn(
                app_ref(current.id),
                record=app_json(wanted),
                spec={"change": change},
                secret=None,
                first_events=[(EventType.INFO, f"App {change} requested by {caller.username}")],
                expect=app_json(current),
                # Stopping frees resources: it never waits behind creations.
                group=None if wanted.stopped else current.group,
            )
        if not queued.queued:
            if queued.current and queued.current != app_json(current):
                raise ChangedMeanwhile(f"app {current.id} was changed meanwhile; ask again")
            raise ConflictError(
                f"app {current.id} is changing already; ask again once its operation is done"
            )
        return wanted

    # Checks --------------------------------------------------------------------------

    def _member(self, caller: UserInfo, group: str) -> None:
        if self._admin or any(g.name == group for g in caller.groups):
            return
        raise PermissionDeniedError(f"user {caller.username} is not a member of group {group}")

    def _size(self, name: str, group: str, *, checked: bool = True) -> PodSize:
        """A lab size (one restricted to some groups only for those groups' apps) or a
        hardware tier (for GPUs and node pools)."""
        config = self._ctx.config
        size = pod_size(config, name)
        if size is None:
            known = [s.name for s in config.lab.sizes]
            known += [t.name for t in config.clusters.tiers if not t.kinds and t.name not in known]
            raise InvalidRequestError(f"no size {name} (sizes: {', '.join(known)})", field="size")
        lab_size = config.lab.size(name)
        if checked and lab_size is not None and lab_size.groups and group not in lab_size.groups:
            raise InvalidRequestError(f"size {name} is not offered to group {group}", field="size")
        return size

    def _within_quota(self, wanted: AppRecord, size: PodSize) -> None:
        """409 ``quota_exceeded`` if the group's running apps, with ``wanted`` as it would
        be, would use more than the group's quota."""
        quota = self._ctx.config.apps.quota_for(wanted.group)
        cpu, memory, gpus = size.cpu_limit, size.memory_limit, size.gpus
        for other in self.all():
            if other.group != wanted.group or other.id == wanted.id or other.stopped:
                continue
            other_size = pod_size(self._ctx.config, other.size)
            if other_size is not None:
                cpu += other_size.cpu_limit
                memory += other_size.memory_limit
                gpus += other_size.gpus
        refusal = _quota_refusal(wanted.group, quota, cpu, memory, gpus)
        if refusal:
            raise QuotaExceededError(refusal)

    @contextmanager
    def _group_lock(self, group: str) -> Iterator[None]:
        """Two requests of one group are checked against its quota one after the other."""
        with budget_lock(self._engine, f"{GROUP_LOCK_PREFIX}{group}"):
            yield


def _quota_refusal(group: str, quota: AppQuota, cpu: float, memory: int, gpus: int) -> str | None:
    if cpu > quota.cpu + 1e-9:
        return (
            f"group {group}'s apps would use {format_cpu(cpu)} cores; its quota is "
            f"{format_cpu(quota.cpu)}"
        )
    if memory > quota.memory:
        return (
            f"group {group}'s apps would use {format_memory(memory)} of memory; its quota is "
            f"{format_memory(quota.memory)}"
        )
    if gpus > quota.gpus:
        return f"group {group}'s apps would use {gpus} GPUs; its quota is {quota.gpus}"
    return None


def _random_part() -> str:
    return "".join(secrets.choice(ID_ALPHABET) for _ in range(ID_LENGTH))


def _missing(app_id: str) -> str:
    return f"no app {app_id}"

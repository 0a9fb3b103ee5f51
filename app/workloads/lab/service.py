"""The lab rules behind the routes: who may spawn what, and the status answers.

Status and list answers come from Redis only; JupyterHub polls them constantly and must
never turn that into Kubernetes API load.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import NoReturn

from app.builders import names
from app.builders.env import ScreenedEnv, screen_request_env
from app.engine.engine import Engine, UnknownEventId
from app.errors import (
    ConflictError,
    DeleteFailedError,
    InvalidRequestError,
    NotFoundError,
    OperationInProgressError,
    PermissionDeniedError,
    RebuildingError,
)
from app.models.identity import UserInfo, user_to_json
from app.models.images import image_to_json
from app.models.lab import LabApi, LabOptions, LabRecord, LabSpec, PodState, SpawnChoices
from app.models.workload import WorkloadStatus
from app.storage.event_hub import Following
from app.storage.events import Event, EventType, entry_order
from app.storage.workloads import DeleteQueued, FailedWorkload
from app.workloads.admission_groups import admission_group
from app.workloads.context import WorkloadContext
from app.workloads.entitlements import allowed_sizes, size_refusal, spawn_refusal
from app.workloads.kernel.service import KernelService
from app.workloads.lab.records import lab_record
from app.workloads.lab.store import LAB_KIND, lab_ref, parse_record, record_json

DROP_BATCH = 500
"""The most failed labs one sweep deletes; the next sweep takes the rest."""
DELETE_WAIT_MARGIN = 10.0
"""Seconds a waiting ``DELETE`` gives a deletion past its deadline: the worker running it
notices the deadline at its next check, then fails it."""


class LabService:
    def __init__(self, ctx: WorkloadContext, engine: Engine) -> None:
        self._ctx = ctx
        self._engine = engine

    # Reads ---------------------------------------------------------------------------

    def list_labs(self) -> list[str]:
        """Every user with a lab; never a partial list while Redis is being rebuilt."""
        stored = self._ctx.labs.stored_usernames()
        if not stored.complete:
            raise RebuildingError()
        return stored.names

    def status_json(self, username: str) -> str:
        """The status body as Redis holds it, for the routes JupyterHub polls constantly:
        records are stored in the response's shape, so nothing is parsed or re-encoded.

        No record means "no lab" only when Redis holds every lab; while it is rebuilt
        after coming back empty, the answer is 503 ``rebuilding``, never a false 404 that
        JupyterHub would read as a stopped server."""
        stored = self._ctx.labs.stored_json(username)
        if stored.record is not None:
            return stored.record
        if not stored.complete:
            raise RebuildingError()
        raise NotFoundError(f"user {username} has no lab")

    # Spawn ---------------------------------------------------------------------------

    def spawn(
        self,
        user: UserInfo,
        choices: SpawnChoices,
        env: dict[str, str],
        token: str,
        *,
        admin: bool = False,
        api: LabApi = LabApi.DMTN_222,
    ) -> LabRecord:
        """Check the request against what this user may have, then queue the spawn.

        Everything is decided here, from Redis and the configuration, so a refusal is an
        immediate 4xx naming the field; the operation only builds what was decided. The
        environment is never a reason to refuse: it is screened (``screen_request_env``)
        and the spawn's first events say what did not reach the lab as sent. ``api`` is
        the API the request came through; the lab keeps its manners.
        """
        lab_config = self._ctx.config.lab
        refusal = spawn_refusal(user)
        if refusal is not None:
            raise PermissionDeniedError(refusal)
        size = lab_config.size(choices.size)
        if size is None:
            names = ", ".join(s.name for s in allowed_sizes(user, lab_config.sizes))
            raise InvalidRequestError(
                f"unknown size {choices.size!r}; sizes are: {names}", field="options.size"
            )
        refusal = size_refusal(user, size)
        if refusal is not None:
            raise InvalidRequestError(refusal, field="options.size")
        if choices.unvalidated_image and not admin:
            raise PermissionDeniedError(
                "only administrators may run an image that is not validated"
            )
        image = self._ctx.images.resolve(choices.image, user, unvalidated=choices.unvalidated_image)
        chosen = LabOptions(
            image=image.reference,
            size=size.name,
            debug=choices.debug,
            reset_user_env=choices.reset_user_env,
            unvalidated_image=choices.unvalidated_image,
        )

        screened = screen_request_env(env, self._ctx.config)
        spec = LabSpec(
            user=user, options=chosen, image=image, size=size, env=screened.kept, api=api
        )
        record = lab_record(
            spec,
            self._ctx.config,
            status=WorkloadStatus.STARTING,
            pod=PodState.MISSING,
            url=None,
        )
        queued = self._engine.queue_spawn(
            lab_ref(user.username),
            record=record_json(record),
            spec={
                "user": user_to_json(user),
                "options": chosen.as_dict(),
                "image": image_to_json(image),
                "env": spec.env,
                "api": api.value,
            },
            secret=token,
            first_events=_requested_events(screened),
            group=admission_group(user, self._ctx.config.admission),
        )
        if queued.rebuilding:
            raise RebuildingError()
        if not queued.queued:
            state = parse_record(queued.current).status if queued.current else None
            if state in (None, WorkloadStatus.TERMINATING):
                raise OperationInProgressError(
                    f"user {user.username}'s lab is {state or 'busy'}; wait for it to end"
                )
            raise ConflictError(
                f"user {user.username} already has a lab ({state}); delete it first"
            )
        return record

    def api(self, username: str) -> LabApi:
        """The API that created the user's lab (DMTN-222's when there is no lab any more:
        its events are still there to read)."""
        record = self._ctx.labs.get(username)
        return record.api if record is not None else LabApi.DMTN_222

    def events_until(self, username: str, after: str) -> list[Event]:
        """The events of the lab's operation up to and including ``after``: what a client
        resuming there has seen (a stream that folds progress into messages needs them)."""
        events = self._engine.events.read(lab_ref(username).key)
        return [event for event in events if event.order <= entry_order(after)]

    def follow_events(self, username: str, after: str) -> Following:
        """The events of the lab's current (or last) operation after ``after``; 404 when
        the user has had no operation lately."""
        try:
            following = self._engine.follow(
                lab_ref(username),
                after=after,
                idle_seconds=self._ctx.config.operations.keepalive_seconds,
            )
        except UnknownEventId:
            raise InvalidRequestError(
                "Last-Event-ID is later than any event of this lab's operation",
                field="Last-Event-ID",
            ) from None
        if following is None:
            self._missing(username, "no lab operation to follow")
        return following

    # Delete --------------------------------------------------------------------------

    def delete(self, username: str) -> LabApi:
        """Start deleting the lab (a spawn under way is superseded), and the user's kernels,
        which serve only it; 404 if there is none. Returns the API that created the lab,
        whose manners the answer keeps."""
        record = self._ctx.labs.get(username)
        if record is None:
            self._missing(username, "no lab")
        result = self._engine.queue_delete(
            lab_ref(username),
            terminating=_terminating,
            first_events=[(EventType.INFO, "Lab deletion requested")],
        )
        if result is DeleteQueued.MISSING:
            self._missing(username, "no lab")
        KernelService(self._ctx, self._engine).delete_all(username)
        return record.api

    def wait_deleted(self, username: str) -> None:
        """Return once the lab's deletion (just queued, or under way) has ended and the lab
        is gone; ``DeleteFailedError`` with the reason if it failed or did not end within
        the deletion's deadline (``lab.deleteTimeout``, and the time a worker takes to see
        it passed)."""
        deadline = time.monotonic() + self._ctx.config.lab.delete_timeout + DELETE_WAIT_MARGIN
        following = self._engine.follow(
            lab_ref(username),
            after="0-0",
            idle_seconds=self._ctx.config.operations.keepalive_seconds,
        )
        if following is None:
            return  # Gone, with its events, already.
        try:
            for batch in following:
                for event in batch or ():
                    if event.type is EventType.COMPLETE:
                        return
                    if event.type is EventType.FAILED:
                        raise DeleteFailedError(f"deleting {username}'s lab failed: {event.data}")
                if time.monotonic() > deadline:
                    break
        finally:
            following.close()
        if self._ctx.labs.get(username) is None:
            return
        raise DeleteFailedError(
            f"{username}'s lab was not gone within {self._ctx.config.lab.delete_timeout:g} s"
        )

    def force_delete(self, username: str) -> None:
        """Delete the lab now, however its pod stopped answering: start its deletion if none
        is under way, and remove its pod without a grace period, as ``kubectl delete
        --force`` does. For a lab stuck terminating (its node gone or hung), whose pod would
        otherwise wait for a kubelet that never confirms; 404 if there is no lab."""
        record = self._ctx.labs.get(username)
        if record is None:
            self._missing(username, "no lab")
        if record.status is not WorkloadStatus.TERMINATING:
            self.delete(username)
        namespace = names.lab_namespace(self._ctx.config.namespace_prefix, username)
        pod = names.object_name(username, names.LAB_SUFFIX)
        self._ctx.kube.delete_pod_with_grace(namespace, pod, grace_seconds=0)

    def failed(self, *, limit: int) -> list[FailedWorkload]:
        """The labs whose spawn failed (or whose pod stopped for good), oldest failure
        first, with when each failed; 503 while the records are rebuilt, when the list
        would be short."""
        self._complete()
        return self._engine.workloads.failed(LAB_KIND, limit=limit)

    def drop_failed(self, *, older_than_seconds: float) -> list[FailedWorkload]:
        """Delete the labs that failed more than ``older_than_seconds`` ago, at most
        ``DROP_BATCH`` of them, oldest first; the ones whose deletion started.

        A failed lab keeps its record (and whatever its namespace still holds) until its
        user spawns again or it is deleted; users who never come back would keep theirs for
        ever. Each goes through an ordinary deletion, so its namespace goes too, and only
        while it still says failed with no spawn queued: a user spawning again at that
        moment wins."""
        self._complete()
        before = time.time() - older_than_seconds
        dropped = []
        for failed in self._engine.workloads.failed(LAB_KIND, before=before, limit=DROP_BATCH):
            hours = (time.time() - failed.failed_at) / 3600
            result = self._engine.queue_delete(
                lab_ref(failed.name),
                terminating=_terminating,
                first_events=[(EventType.INFO, f"Deleting the lab that failed {hours:.1f} h ago")],
                failed_only=True,
            )
            if result is DeleteQueued.QUEUED:
                dropped.append(failed)
                KernelService(self._ctx, self._engine).delete_all(failed.name)
        return dropped

    def _missing(self, username: str, what: str) -> NoReturn:
        """404 for a lab Redis does not have, or 503 while Redis may not have it yet."""
        self._complete()
        raise NotFoundError(f"user {username} has {what}")

    def _complete(self) -> None:
        """503 ``rebuilding`` while Redis is rebuilt from Kubernetes."""
        self._engine.workloads.require_complete()


def _requested_events(screened: ScreenedEnv) -> list[tuple[EventType, str]]:
    """The spawn's first events: the request, and what of its environment the lab will not
    see as sent."""
    events = [(EventType.INFO, "Lab creation requested")]
    notice = screened.notice()
    if notice is not None:
        events.append((EventType.INFO, notice))
    return events


def _terminating(raw: str) -> str:
    """The record of a lab being deleted: terminating, with no error left from before."""
    record = replace(parse_record(raw), status=WorkloadStatus.TERMINATING, error=None)
    return record_json(record)

"""The lab rules behind the routes: who may spawn what, and the status answers.

Status and list answers come from Redis only; JupyterHub polls them constantly and must
never turn that into Kubernetes API load.
"""

from __future__ import annotations

from dataclasses import replace

from app.engine.engine import Engine
from app.errors import ConflictError, InvalidRequestError, NotFoundError, PermissionDeniedError
from app.models.identity import UserInfo, user_to_json
from app.models.images import image_to_json
from app.models.lab import LabOptions, LabRecord, LabSpec, LabStatus, PodState, SpawnChoices
from app.services.context import LabContext
from app.services.entitlements import allowed_sizes, size_refusal, spawn_refusal
from app.storage.event_hub import Following
from app.storage.events import EventType
from app.storage.labs import lab_ref, parse_record, record_json
from app.storage.workloads import DeleteQueued
from app.workloads.lab.records import lab_record


class LabService:
    def __init__(self, ctx: LabContext, engine: Engine) -> None:
        self._ctx = ctx
        self._engine = engine

    # Reads ---------------------------------------------------------------------------

    def list_labs(self) -> list[str]:
        return self._ctx.labs.usernames()

    def status(self, username: str) -> LabRecord:
        record = self._ctx.labs.get(username)
        if record is None:
            raise NotFoundError(f"user {username} has no lab")
        return record

    def status_json(self, username: str) -> str:
        """The status body as Redis holds it, for the routes JupyterHub polls constantly:
        records are stored in the response's shape, so nothing is parsed or re-encoded."""
        raw = self._ctx.labs.get_json(username)
        if raw is None:
            raise NotFoundError(f"user {username} has no lab")
        return raw

    # Spawn ---------------------------------------------------------------------------

    def spawn(
        self, user: UserInfo, choices: SpawnChoices, env: dict[str, str], token: str
    ) -> LabRecord:
        """Check the request against what this user may have, then queue the spawn.

        Everything is decided here, from Redis and the configuration, so a refusal is an
        immediate 4xx naming the field; the operation only builds what was decided.
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
        image = self._ctx.images.resolve(choices.image, user)
        chosen = LabOptions(
            image=image.reference,
            size=size.name,
            debug=choices.debug,
            reset_user_env=choices.reset_user_env,
        )

        spec = LabSpec(user=user, options=chosen, image=image, size=size, env=env)
        record = lab_record(
            spec,
            self._ctx.config,
            status=LabStatus.STARTING,
            pod=PodState.MISSING,
            reachable=False,
        )
        queued = self._engine.queue_spawn(
            lab_ref(user.username),
            record=record_json(record),
            spec={
                "user": user_to_json(user),
                "options": chosen.as_dict(),
                "image": image_to_json(image),
                "env": env,
            },
            secret=token,
            first_events=[(EventType.INFO, "Lab creation requested")],
        )
        if not queued.queued:
            state = parse_record(queued.current).status.value if queued.current else "busy"
            raise ConflictError(
                f"user {user.username} already has a lab ({state}); delete it first"
            )
        return record

    def follow_events(self, username: str, after: str) -> Following | None:
        """The events of the lab's current (or last) operation after ``after``; None when
        the user has had no operation lately."""
        return self._engine.follow(
            lab_ref(username),
            after=after,
            idle_seconds=self._ctx.config.operations.keepalive_seconds,
        )

    # Delete --------------------------------------------------------------------------

    def delete(self, username: str) -> None:
        """Start deleting the lab (a spawn under way is superseded); 404 if there is none."""
        result = self._engine.queue_delete(
            lab_ref(username),
            terminating=_terminating,
            first_events=[(EventType.INFO, "Lab deletion requested")],
        )
        if result is DeleteQueued.MISSING:
            raise NotFoundError(f"user {username} has no lab")


def _terminating(raw: str) -> str:
    """The record of a lab being deleted: terminating, with no error left from before."""
    record = replace(parse_record(raw), status=LabStatus.TERMINATING, error=None)
    return record_json(record)

"""The lab rules behind the routes: who may spawn what, and the status answers.

Status and list answers come from Redis only; JupyterHub polls them constantly and must
never turn that into Kubernetes API load.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from app.errors import ConflictError, InvalidRequestError, NotFoundError, PermissionDeniedError
from app.models.identity import UserInfo, user_to_json
from app.models.images import image_to_json
from app.models.lab import (
    LabOptions,
    LabRecord,
    LabSpec,
    LabStatus,
    Operation,
    OperationKind,
    PodState,
    SpawnChoices,
)
from app.services.context import LabContext
from app.services.entitlements import allowed_sizes, size_refusal, spawn_refusal
from app.services.operations import OperationRunner
from app.services.records import lab_record
from app.services.spawn import HeadStart, starting_events
from app.storage.events import EventType
from app.storage.labs import StartResult


class LabService:
    def __init__(self, ctx: LabContext, runner: OperationRunner) -> None:
        self._ctx = ctx
        self._runner = runner

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

        now = time.time()
        operation = Operation(
            id=uuid.uuid4().hex,
            kind=OperationKind.SPAWN,
            username=user.username,
            started=now,
            deadline=now + lab_config.spawn_timeout,
            spec={
                "user": user_to_json(user),
                "options": chosen.as_dict(),
                "image": image_to_json(image),
                "env": env,
            },
        )
        spec = LabSpec(user=user, options=chosen, image=image, size=size, env=env)
        record = lab_record(
            spec,
            self._ctx.config,
            status=LabStatus.STARTING,
            pod=PodState.MISSING,
            reachable=False,
        )

        first_event = self._ctx.events.announcement(
            user.username, [(EventType.INFO, "Lab creation requested")]
        )
        # This worker runs the spawn itself when it has room: it takes the lease with the
        # operation, so nothing stands between the answer and the first Kubernetes call.
        claim = self._runner.claim(user.username)
        # Its start is announced with the operation, and it learns from the same script
        # whether the user was provisioned: two Redis round trips fewer for the spawn.
        starting = (
            self._ctx.events.announcement(user.username, starting_events(spec))
            if claim is not None
            else None
        )
        outcome = self._ctx.labs.start_spawn(
            record, operation, first_event, token, claim, if_leased=starting
        )
        if claim is not None and outcome.leased:
            self._runner.run_claimed(operation, token, HeadStart(outcome.provisioned))
        else:
            if claim is not None:
                self._runner.release_claim(user.username)
            if outcome.result is StartResult.CONFLICT:
                state = outcome.current.status.value if outcome.current else "busy"
                raise ConflictError(
                    f"user {user.username} already has a lab ({state}); delete it first"
                )
            self._runner.submit(user.username)
        return record

    # Delete --------------------------------------------------------------------------

    def delete(self, username: str) -> None:
        now = time.time()
        operation = Operation(
            id=uuid.uuid4().hex,
            kind=OperationKind.DELETE,
            username=username,
            started=now,
            deadline=now + self._ctx.config.lab.delete_timeout,
        )

        def reset_events(pipe: Any) -> None:
            self._ctx.events.restart(pipe, username, "Lab deletion requested")

        outcome = self._ctx.labs.start_delete(username, operation, reset_events)
        if outcome.result is StartResult.MISSING:
            raise NotFoundError(f"user {username} has no lab")
        if outcome.result is StartResult.STARTED:
            self._runner.submit(username)

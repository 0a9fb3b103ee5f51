"""The rules behind the kernel routes: who may start a kernel of what, and the answers.

A request is checked whole before anything happens: the user has a running lab (the kernel
lives in its namespace, and its Jupyter server is what talks to it), the size is one the user
may have (a lab size as at spawn, or a hardware tier open to kernels), the image is one the
user may spawn (the lab's by default), and the kernel fits the user's budget with what they
hold already, clusters included. Only then is the kernel recorded and its start queued, under
the owner's budget lock. The connection key goes with the operation as its secret: it is
written to the kernel's Secret and to nothing else.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field, replace

from app.builders.env import ScreenedEnv, screen_request_env
from app.builders.names import lab_namespace
from app.builders.pod import image_reference
from app.engine.engine import Engine
from app.engine.service import RecordCodec
from app.errors import (
    ConflictError,
    InvalidRequestError,
    QuotaExceededError,
    RebuildingError,
)
from app.models.identity import UserInfo
from app.models.images import ImageChoice
from app.models.workload import WorkloadStatus
from app.storage.events import EventType
from app.storage.workloads import DeleteQueued
from app.timestamps import iso_utc
from app.workloads.admission_groups import admission_group
from app.workloads.beside_lab import BesideLabService
from app.workloads.budgets import budget_for, budget_lock, budget_refusal, lab_user
from app.workloads.context import WorkloadContext
from app.workloads.holdings import holdings_of
from app.workloads.kernel.builders import SERVICE_ENV, SERVICE_ENV_PREFIX
from app.workloads.kernel.kind import spec_to_json
from app.workloads.kernel.models import KernelRecord, KernelSpec, kernel_size_usage
from app.workloads.kernel.records import kernel_json, new_record, parse_kernel
from app.workloads.refs import KERNEL_KIND, kernel_ref
from app.workloads.sizes import size_for


@dataclass(frozen=True)
class KernelRequest:
    size: str
    key: str
    """The connection's HMAC key: the kernel's Secret is the one place it is written."""
    image: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    kernel_id: str | None = None

    def __repr__(self) -> str:
        # The key is a credential: keep it out of any log line or traceback.
        return f"KernelRequest(size={self.size!r}, image={self.image!r}, id={self.kernel_id!r})"


KERNEL_RECORDS = RecordCodec(
    kind=KERNEL_KIND,
    noun="kernel",
    parse=parse_kernel,
    dump=kernel_json,
    # A kernel being deleted keeps how it ended, if it had.
    terminating=lambda record: replace(record, status=WorkloadStatus.TERMINATING),
)


class KernelService(BesideLabService[KernelRecord]):
    def __init__(self, ctx: WorkloadContext, engine: Engine) -> None:
        super().__init__(ctx, engine, KERNEL_RECORDS)

    def of_owner(self, owner: str) -> list[KernelRecord]:
        """The owner's kernels, oldest first; never a partial list while Redis is rebuilt."""
        return sorted(self.owned_by(owner), key=lambda record: record.created)

    # Create --------------------------------------------------------------------------

    def create(self, username: str, caller: UserInfo, request: KernelRequest) -> KernelRecord:
        """Start a kernel for ``username``: the caller themself, or an administrator acting
        for them (the user is then known from their running lab's record)."""
        lab = self._ctx.labs.get(username)
        if lab is None or lab.status is not WorkloadStatus.RUNNING:
            raise ConflictError(f"user {username} has no running lab to run a kernel beside")
        user = caller if caller.username == username else lab_user(lab)
        size = size_for(self._ctx.config, request.size, user)
        if isinstance(size, str):
            raise InvalidRequestError(size, field="size")
        image = str(lab.options.get("image") or "")
        if request.image is not None:
            choice = ImageChoice(reference=request.image, field="image")
            image = image_reference(self._ctx.images.resolve(choice, user))
        kernel_id = request.kernel_id or str(uuid.uuid4())
        screened = screen_request_env(
            request.env,
            self._ctx.config,
            also_set=SERVICE_ENV,
            also_set_prefixes=(SERVICE_ENV_PREFIX,),
        )
        spec = KernelSpec(kernel_id=kernel_id, user=user, image=image, size=size, env=screened.kept)
        namespace = lab_namespace(self._ctx.config.namespace_prefix, user.username)
        record = new_record(spec, namespace, iso_utc(time.time()) or "")
        with budget_lock(self._engine, user.username):
            self.require_complete()
            held = holdings_of(self._ctx, self._engine.workloads.records, user.username).usage()
            budget = budget_for(user, self._ctx.config.budgets)
            refusal = budget_refusal(budget, held, kernel_size_usage(size))
            if refusal is not None:
                raise QuotaExceededError(refusal)
            queued = self._engine.queue_spawn(
                kernel_ref(user.username, kernel_id),
                record=kernel_json(record),
                spec=spec_to_json(spec),
                secret=request.key,
                first_events=_requested_events(kernel_id, screened),
                group=admission_group(user, self._ctx.config.admission),
            )
        if queued.rebuilding:
            raise RebuildingError()
        if not queued.queued:
            raise ConflictError(f"user {username} has a kernel {kernel_id} already")
        return record

    # Delete --------------------------------------------------------------------------

    def delete(self, owner: str, kernel_id: str, *, grace_seconds: int) -> KernelRecord:
        """Start deleting the kernel, giving it ``grace_seconds`` to stop; its record as the
        deletion began."""
        return self.start_delete(
            kernel_ref(owner, kernel_id),
            missing=self.missing(owner, kernel_id),
            first_events=[(EventType.INFO, f"Deletion of kernel {kernel_id} requested")],
            spec={"grace_seconds": grace_seconds},
        )

    def delete_all(self, owner: str) -> int:
        """Start deleting every kernel of ``owner`` (their lab is going); how many."""
        count = 0
        records = self._engine.workloads.records(KERNEL_KIND)
        prefix = f"{owner}/"
        for name, raw in records.items():
            if not name.startswith(prefix):
                continue
            record = parse_kernel(raw)
            if record.status is WorkloadStatus.TERMINATING:
                continue
            result = self._engine.queue_delete(
                kernel_ref(owner, record.kernel_id),
                terminating=KERNEL_RECORDS.terminating_json,
                first_events=[(EventType.INFO, "Deletion with the lab")],
            )
            count += result is DeleteQueued.QUEUED
        return count


def _requested_events(kernel_id: str, screened: ScreenedEnv) -> list[tuple[EventType, str]]:
    """The kernel's first events: the request, and what of its environment it will not see
    as sent (as a lab's spawn says)."""
    events = [(EventType.INFO, f"Kernel {kernel_id} requested")]
    notice = screened.notice("kernel")
    if notice is not None:
        events.append((EventType.INFO, notice))
    return events

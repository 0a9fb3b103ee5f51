"""What a user may hold at once, and whether a request would pass it.

A budget bounds everything a user holds across their compute clusters and remote kernels (and, as
that kind comes, apps): how many clusters, workers and kernels, and the CPU, memory and GPUs
their pods request. A user's budget is taken limit by limit, each the largest that any of their
groups is given; a user in no budgeted group has the default. A request is checked against
what the user holds already plus what it adds, and refused whole, naming the first limit it
would pass, so nothing is half-created.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from app.engine.engine import Engine
from app.errors import DependencyUnavailableError
from app.models.config import Budget, BudgetsConfig
from app.models.identity import UserInfo, user_from_json
from app.models.lab import LabRecord
from app.models.usage import Usage
from app.models.workload import WorkloadRef

GIB = 1024**3
BUDGET_LOCK = "budget"
"""The pseudo-kind of the per-owner lock taken while a request is checked against a budget."""
BUDGET_LOCK_SECONDS = 5.0
BUDGET_LOCK_WAIT_SECONDS = 2.0


def lab_user(lab: LabRecord) -> UserInfo:
    """The user a lab was spawned for, as its record keeps them: enough for budgets (the
    groups), images (the groups) and pods (uid and gid). An administrator acting for a user
    is checked against the user's budget, known this way."""
    return user_from_json(
        {"username": lab.username, "uid": lab.uid, "gid": lab.gid, "groups": lab.groups}
    )


@contextmanager
def budget_lock(engine: Engine, owner: str) -> Iterator[None]:
    """The owner's budget lock: a short lease in Redis, waited for briefly, held while a
    request is checked against the budget and carried out."""
    lease = engine.workloads.lock(
        WorkloadRef(BUDGET_LOCK, owner), uuid.uuid4().hex, BUDGET_LOCK_SECONDS
    )
    deadline = time.monotonic() + BUDGET_LOCK_WAIT_SECONDS
    while not lease.acquire():
        if time.monotonic() > deadline:
            raise DependencyUnavailableError("another request of this user holds its budget")
        time.sleep(0.02)
    try:
        yield
    finally:
        lease.release()


def budget_for(user: UserInfo, budgets: BudgetsConfig) -> Budget:
    """The user's budget: limit by limit, the largest of their groups', else the default."""
    names = {group.name for group in user.groups}
    found = [entry.budget for entry in budgets.groups if entry.group in names]
    if not found:
        return budgets.default
    return Budget(
        clusters=max(b.clusters for b in found),
        workers=max(b.workers for b in found),
        kernels=max(b.kernels for b in found),
        cpu=max(b.cpu for b in found),
        memory=max(b.memory for b in found),
        gpus=max(b.gpus for b in found),
    )


def budget_refusal(budget: Budget, held: Usage, adding: Usage) -> str | None:
    """Why holding ``adding`` on top of ``held`` would pass ``budget`` (the first limit it
    passes, with the numbers), or None when it fits."""
    total = held + adding
    checks = (
        ("clusters", adding.clusters, total.clusters, budget.clusters, _count),
        ("workers", adding.workers, total.workers, budget.workers, _count),
        ("kernels", adding.kernels, total.kernels, budget.kernels, _count),
        ("cpu", adding.cpu, total.cpu, budget.cpu, _cores),
        ("memory", adding.memory, total.memory, budget.memory, _memory),
        ("gpus", adding.gpus, total.gpus, budget.gpus, _count),
    )
    for limit, added, wanted, allowed, shown in checks:
        if added > 0 and wanted > allowed:
            return (
                f"the {limit} budget would be passed: {shown(wanted)} in all, "
                f"{shown(allowed)} allowed ({shown(wanted - added)} held already)"
            )
    return None


def _count(value: float) -> str:
    return f"{value:g}"


def _cores(value: float) -> str:
    return f"{value:g} CPU"


def _memory(value: float) -> str:
    return f"{value / GIB:g} GiB"

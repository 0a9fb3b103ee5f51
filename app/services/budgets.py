"""What a user may hold at once, and whether a request would pass it.

A budget bounds everything a user holds across their compute clusters (and, as those kinds
come, kernels and apps): how many clusters, how many workers, and the CPU, memory and GPUs
their pods request. A user's budget is taken limit by limit, each the largest that any of their
groups is given; a user in no budgeted group has the default. A request is checked against
what the user holds already plus what it adds, and refused whole, naming the first limit it
would pass, so nothing is half-created.
"""

from __future__ import annotations

from app.config.models import Budget, BudgetsConfig
from app.models.identity import UserInfo
from app.models.usage import Usage

GIB = 1024**3


def budget_for(user: UserInfo, budgets: BudgetsConfig) -> Budget:
    """The user's budget: limit by limit, the largest of their groups', else the default."""
    names = {group.name for group in user.groups}
    found = [entry.budget for entry in budgets.groups if entry.group in names]
    if not found:
        return budgets.default
    return Budget(
        clusters=max(b.clusters for b in found),
        workers=max(b.workers for b in found),
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

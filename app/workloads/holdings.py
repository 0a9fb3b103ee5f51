"""Everything a user holds beside their lab: the one place budgets and the lab namespace's
quota read it from.

Some kinds' workloads run in their owner's lab namespace and count against one budget (a
user's compute clusters and remote kernels). Such a kind declares it with a ``Budgeted``
(``app.workloads.budgeted``): how one of its records is counted. The budget and the
namespace's quota are then computed from the records of every kind so declared, read once,
so a check and the quota written after it agree, and neither names a kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from app.builders.resource_quota import Compute
from app.models.usage import Usage
from app.workloads.budgeted import Held
from app.workloads.context import WorkloadContext


@dataclass(frozen=True)
class Holdings:
    """One user's budgeted workloads, as their records say now."""

    owner: str
    held: tuple[Held, ...] = ()

    def usage(self) -> Usage:
        """What they hold against the budget."""
        total = Usage()
        for item in self.held:
            total = total + item.usage
        return total

    def compute(self) -> Compute:
        """What their pods request and may use, for the namespace's quota."""
        total = Compute()
        for item in self.held:
            total = total + item.compute
        return total

    def with_held(self, changed: Held) -> Holdings:
        """These holdings with ``changed`` at the shape it is to have (or added)."""
        others = self.without(changed.kind, changed.name)
        return replace(others, held=(*others.held, changed))

    def without(self, kind: str, name: str) -> Holdings:
        kept = tuple(i for i in self.held if (i.kind, i.name) != (kind, name))
        return replace(self, held=kept)


def holdings_of(
    ctx: WorkloadContext, records_of_kind: Callable[[str], dict[str, str]], owner: str
) -> Holdings:
    """``owner``'s workloads of every budgeted kind (``WorkloadContext.budgeted``), read
    from Redis (one read per kind) with ``records_of_kind``: the engine's for a service, a
    run's for a kind's steps."""
    prefix = f"{owner}/"
    return Holdings(
        owner=owner,
        held=tuple(
            declared.held(raw, ctx.config)
            for declared in ctx.budgeted
            for name, raw in records_of_kind(declared.kind).items()
            if name.startswith(prefix)
        ),
    )

"""How a kind declares that its workloads count against their owner's budget and lab
namespace quota (``ServiceKind.budget``), summed by ``app.workloads.holdings``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.builders.resource_quota import Compute
from app.models.config import Config
from app.models.usage import Usage


@dataclass(frozen=True)
class Held:
    """One workload as its owner's budget and lab namespace quota count it."""

    kind: str
    name: str
    """Its name in the engine (``owner/...``)."""
    usage: Usage
    """What it holds against the budget (nothing once it failed or ended)."""
    compute: Compute
    """What its pods request and may use, for the namespace's quota."""


@dataclass(frozen=True)
class Budgeted:
    """A kind's declaration that its workloads count against their owner's budget and
    quota: the kind, and how one of its records (as stored) is counted."""

    kind: str
    held: Callable[[str, Config], Held]

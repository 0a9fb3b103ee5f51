"""What a kernel holds against its owner's budget and lab namespace quota: its size, while
its pod holds (or is about to hold) resources."""

from __future__ import annotations

from app.builders.resource_quota import Compute, pod_compute
from app.models.config import Config
from app.models.usage import Usage
from app.workloads.budgeted import Budgeted, Held
from app.workloads.kernel.records import parse_kernel
from app.workloads.refs import KERNEL_KIND
from app.workloads.sizes import pod_size


def kernel_held(raw: str, config: Config) -> Held:
    """One kernel's record (as stored), as the budget and the quota count it."""
    record = parse_kernel(raw)
    size = pod_size(config, record.size) if record.holds else None
    return Held(
        kind=KERNEL_KIND,
        name=f"{record.owner}/{record.kernel_id}",
        usage=Usage.from_json(record.usage) if record.holds else Usage(),
        compute=pod_compute(size) if size is not None else Compute(),
    )


KERNEL_BUDGET = Budgeted(KERNEL_KIND, kernel_held)
"""Kernels count against their owner's budget and run in their lab namespace."""

"""What a user may have: whether they may spawn at all, and which sizes and image sources.

The spawn form and the spawn route apply the same rules from here, so a user is never offered
something the spawn would refuse, nor refused something the form offered.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.models.config import LabSize
from app.models.identity import UserInfo

GIB = 1024**3


def in_any_group(user: UserInfo, groups: Iterable[str]) -> bool:
    """True when ``groups`` is empty (no restriction) or the user is in one of them."""
    wanted = set(groups)
    return not wanted or any(group.name in wanted for group in user.groups)


def spawn_refusal(user: UserInfo) -> str | None:
    """Why this user may not spawn any lab, or None if they may."""
    if user.uid is None or user.gid is None:
        return f"user {user.username} has no UID or GID, so no lab can run as them"
    if user.notebook_quota is not None and not user.notebook_quota.spawn:
        return f"user {user.username} may not spawn labs (their notebook quota forbids it)"
    return None


def size_refusal(user: UserInfo, size: LabSize) -> str | None:
    """Why this user may not have this size, or None if they may."""
    if not in_any_group(user, size.groups):
        return f"size {size.name} is only for members of {', '.join(size.groups)}"
    quota = user.notebook_quota
    if quota is not None and (size.cpu > quota.cpu or size.memory > quota.memory_gib * GIB):
        return (
            f"size {size.name} ({format_size(size)}) exceeds the quota of user {user.username} "
            f"({quota.cpu:g} CPU, {quota.memory_gib:g} GiB)"
        )
    return None


def allowed_sizes(user: UserInfo, sizes: Iterable[LabSize]) -> list[LabSize]:
    return [size for size in sizes if size_refusal(user, size) is None]


def format_size(size: LabSize) -> str:
    """``4 CPU, 16 GiB``: what the form shows next to a size's name."""
    memory = size.memory / GIB
    shown = f"{memory:g} GiB" if memory >= 1 else f"{size.memory / 1024**2:g} MiB"
    return f"{size.cpu:g} CPU, {shown}"

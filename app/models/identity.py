"""Who is calling: what Gafaelfawr says about a token and its user."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, cast

GROUP_NAME_PATTERN = r"^[a-zA-Z][a-zA-Z0-9._-]*$"
"""A group's name as Gafaelfawr allows it: a letter, then letters, digits, ``.``, ``_``,
``-``. Names from requests are checked against it where they enter, since paths and object
names are built from them (a group volume's path among them)."""

_GROUP_NAME = re.compile(GROUP_NAME_PATTERN)


def is_group_name(name: str) -> bool:
    return bool(_GROUP_NAME.match(name))


@dataclass(frozen=True)
class TokenData:
    """The verified facts about a token (from Gafaelfawr's token-info)."""

    username: str
    scopes: frozenset[str]
    token_type: str


@dataclass(frozen=True)
class Group:
    """A group the user belongs to; ``id`` is None for groups without a GID."""

    name: str
    id: int | None


@dataclass(frozen=True)
class NotebookQuota:
    """The user's notebook quota: CPUs, memory in GiB, and whether they may spawn at all."""

    cpu: float
    memory_gib: float
    spawn: bool


@dataclass(frozen=True)
class UserInfo:
    """The user's identity (from Gafaelfawr's user-info)."""

    username: str
    name: str | None
    email: str | None
    uid: int | None
    gid: int | None
    groups: tuple[Group, ...]
    notebook_quota: NotebookQuota | None


ADMIN_SCOPE = "admin:notebook"
"""Held by JupyterHub's own token and administrators."""


@dataclass(frozen=True)
class Caller:
    """An authenticated request: the raw token (for delegation), what it proves, and the
    user's identity when the route asked for it."""

    token: str
    data: TokenData
    user: UserInfo | None = None

    @property
    def username(self) -> str:
        return self.data.username

    @property
    def is_admin(self) -> bool:
        """JupyterHub or an administrator: may act on every user's workloads."""
        return ADMIN_SCOPE in self.data.scopes

    def __repr__(self) -> str:
        # The token is a credential: keep it out of any log line or traceback.
        return f"Caller(username={self.username!r}, scopes={sorted(self.data.scopes)!r})"


def user_to_json(user: UserInfo) -> dict[str, object]:
    """A ``UserInfo`` as JSON, to carry a spawn's identity in its operation record."""
    quota = user.notebook_quota
    return {
        "username": user.username,
        "name": user.name,
        "email": user.email,
        "uid": user.uid,
        "gid": user.gid,
        "groups": [{"name": g.name, "id": g.id} for g in user.groups],
        "notebook_quota": (
            {"cpu": quota.cpu, "memory_gib": quota.memory_gib, "spawn": quota.spawn}
            if quota
            else None
        ),
    }


def user_from_json(data: dict[str, object]) -> UserInfo:
    quota = data.get("notebook_quota")
    groups = cast(list[dict[str, Any]], data.get("groups") or [])
    return UserInfo(
        username=str(data["username"]),
        name=data.get("name"),  # type: ignore[arg-type]
        email=data.get("email"),  # type: ignore[arg-type]
        uid=data.get("uid"),  # type: ignore[arg-type]
        gid=data.get("gid"),  # type: ignore[arg-type]
        groups=tuple(Group(name=g["name"], id=g.get("id")) for g in groups),
        notebook_quota=NotebookQuota(**quota) if isinstance(quota, dict) else None,
    )
